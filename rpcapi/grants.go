package rpcapi

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
)

// grants refuses a call whose principal lacks its procedure's grant in
// herald.Operations (E4013, PERMISSION_DENIED) before the handler runs; a procedure
// without an entry is refused as well. Both services are mounted with it.
type grants struct{}

func (grants) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := herald.CheckOperation(herald.PrincipalFrom(ctx), req.Spec().Procedure); err != nil {
			return nil, toConnect(err)
		}
		return next(ctx, req)
	}
}

func (grants) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (grants) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := herald.CheckOperation(herald.PrincipalFrom(ctx), conn.Spec().Procedure); err != nil {
			return toConnect(err)
		}
		return next(ctx, conn)
	}
}

// errorWriter writes errors in the protocol an RPC caller speaks (gRPC, gRPC-Web or
// Connect).
var errorWriter = connect.NewErrorWriter()

// WriteError answers r with err in the protocol of its RPC (gRPC, gRPC-Web or Connect),
// with the same code and detail a handler's error carries, and reports true; for a
// request that is not an RPC it writes nothing and reports false. Middleware in front
// of the services (authentication, limits) answers RPC callers with it, so that their
// clients see the coded error and not an HTTP status they cannot read.
func WriteError(w http.ResponseWriter, r *http.Request, err error) bool {
	// A JSON POST to /v1/query looks like a Connect call to the error writer: only a
	// request to a procedure's path, or in an RPC content type, is an RPC (isRPC).
	if !isRPC(r) || !errorWriter.IsSupported(r) {
		return false
	}
	_ = errorWriter.Write(w, r, toConnect(err))
	return true
}

// StreamingRequests lists the procedures whose request is a stream (client or
// bidirectional streaming): their request body lasts as long as the call, so a bound on
// reading a request's body does not apply to them. Server reflection is one.
func StreamingRequests() []string {
	out := []string{reflectV1, reflectV1Beta}
	services := heraldv1.File_herald_proto.Services()
	for i := 0; i < services.Len(); i++ {
		sd := services.Get(i)
		for j := 0; j < sd.Methods().Len(); j++ {
			if m := sd.Methods().Get(j); m.IsStreamingClient() {
				out = append(out, "/"+string(sd.FullName())+"/"+string(m.Name()))
			}
		}
	}
	return out
}
