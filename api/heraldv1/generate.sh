#!/bin/sh
# Regenerates the Go code of herald.proto. The generated files are committed; run this
# after changing the .proto, with protoc (Debian: protobuf-compiler) and the plugins
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.11
#   go install connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.21.1
# on PATH.
set -eu
cd "$(dirname "$0")"
protoc -I . \
	--go_out=. --go_opt=paths=source_relative \
	--connect-go_out=. --connect-go_opt=paths=source_relative \
	herald.proto
