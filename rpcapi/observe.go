package rpcapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/herald-mq/herald"
)

// Every call the services answer is logged and measured like a request of the JSON API:
// one "rpc request" record and one Options.Observe call when it ends, with its
// procedure, its code and how long it took. A stream counts once, when it ends.

// OtherProcedure is the procedure an observation names for a call to a method this
// server does not have, so that the metrics' labels stay a known set.
const OtherProcedure = "other"

// observer is the interceptor that logs and measures each call. It is the outermost
// interceptor of every handler, so that it sees the grants' refusals too.
type observer struct{ s *Service }

func (o observer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		resp, err := next(ctx, req)
		o.s.observe(ctx, call{procedure: req.Spec().Procedure, peer: req.Peer(), err: err, elapsed: time.Since(start)})
		return resp, err
	}
}

func (observer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (o observer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, conn)
		o.s.observe(ctx, call{procedure: conn.Spec().Procedure, peer: conn.Peer(), stream: true, err: err, elapsed: time.Since(start)})
		return err
	}
}

// call is one finished RPC.
type call struct {
	procedure string
	unknown   bool // a procedure the server does not have: OtherProcedure in the metrics
	peer      connect.Peer
	stream    bool
	err       error
	elapsed   time.Duration
}

// codeOf returns the RPC code a call ended with ("ok" without an error) and the Herald
// code its error carries, if any.
func codeOf(err error) (connect.Code, herald.Code) {
	if err == nil {
		return 0, ""
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code(), herald.Code(ce.Meta().Get(HeaderCode))
	}
	switch {
	case errors.Is(err, context.Canceled):
		return connect.CodeCanceled, ""
	case errors.Is(err, context.DeadlineExceeded):
		return connect.CodeDeadlineExceeded, ""
	}
	return connect.CodeUnknown, ""
}

// CodeName is the name of an RPC code as the metrics and logs show it: "ok" for a call
// that succeeded (code 0), else Connect's name ("not_found").
func CodeName(c connect.Code) string {
	if c == 0 {
		return "ok"
	}
	return c.String()
}

// healthProcedures are logged at debug level, like /healthz and /readyz: probes call
// them every few seconds.
var healthProcedures = map[string]bool{healthCheck: true, healthWatch: true}

// observe logs c and passes it to Options.Observe.
func (s *Service) observe(ctx context.Context, c call) {
	code, hcode := codeOf(c.err)
	name := CodeName(code)
	if s.onCall != nil {
		label := c.procedure
		if c.unknown {
			label = OtherProcedure
		}
		s.onCall(label, name, c.elapsed)
	}
	level := slog.LevelInfo
	switch {
	case httpStatus(code, hcode) >= 500:
		level = slog.LevelError
	case healthProcedures[c.procedure]:
		level = slog.LevelDebug
	}
	if !s.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("procedure", c.procedure),
		slog.String("protocol", c.peer.Protocol),
		slog.String("status", name),
		slog.Duration("duration", c.elapsed),
		slog.String("remote", c.peer.Addr),
	}
	if c.stream {
		attrs = append(attrs, slog.Bool("stream", true))
	}
	if hcode != "" {
		attrs = append(attrs, slog.String("code", string(hcode)))
	}
	if c.err != nil && level == slog.LevelError {
		attrs = append(attrs, slog.String("err", c.err.Error()))
	}
	s.log.LogAttrs(ctx, level, "rpc request", attrs...)
}

// httpStatus is the HTTP status that stands for an RPC's outcome in the choice of its
// log level, the same rule as the JSON API's (5xx at error level): the Herald code's
// status when the error carries one, else the Connect protocol's status for the code.
func httpStatus(code connect.Code, hcode herald.Code) int {
	if hcode != "" {
		return hcode.Info().HTTP
	}
	switch code {
	case 0:
		return http.StatusOK
	case connect.CodeCanceled:
		return 499
	case connect.CodeUnknown, connect.CodeInternal, connect.CodeDataLoss:
		return http.StatusInternalServerError
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	case connect.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusBadRequest // a caller's mistake of some kind
}
