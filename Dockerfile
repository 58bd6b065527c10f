# syntax=docker/dockerfile:1
#
# The herald binary in a small image: built in Go's image, run from a distroless one
# (no shell, no package manager) as a user without privileges, with its data on a
# volume. docs/operations.md ("Container image") shows how to run it.
#
#   docker build -t herald .

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# The dependencies first, so that a change to the code reuses their layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
# A static binary (the runtime image has no C library); the workspace file joins
# modules the binary does not need, so the build ignores it.
RUN CGO_ENABLED=0 GOWORK=off go build -trimpath \
      -ldflags "-s -w -X github.com/herald-mq/herald/internal/cli.Version=${VERSION}" \
      -o /out/herald ./cmd/herald \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot AS runtime
COPY --from=build /out/herald /usr/local/bin/herald
# The data directory, owned by the user the server runs as (distroless's nonroot).
COPY --from=build --chown=65532:65532 /out/data /var/lib/herald
USER 65532:65532
# Every flag of herald serve has its HERALD_* variable; these are the image's defaults.
# A server listening beyond loopback needs TLS and client authentication
# (HERALD_TLS_CERT, HERALD_TLS_KEY, HERALD_AUTH=true) or, on a network that protects
# the port by other means, HERALD_INSECURE=true: without either it refuses to start.
ENV HERALD_DATA=/var/lib/herald \
    HERALD_LISTEN=0.0.0.0:7420 \
    HERALD_LOG_FORMAT=json
VOLUME ["/var/lib/herald"]
EXPOSE 7420
# herald health asks /readyz; a server with TLS needs HERALD_ADDR=https://… and
# HERALD_CA for it.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/herald", "health"]
ENTRYPOINT ["/usr/local/bin/herald"]
CMD ["serve"]
