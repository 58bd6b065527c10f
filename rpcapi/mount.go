package rpcapi

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/api/heraldv1/heraldv1connect"
)

// The procedures of the standard services mounted beside Herald's own.
const (
	healthCheck   = "/" + grpchealth.HealthV1ServiceName + "/Check"
	healthWatch   = "/" + grpchealth.HealthV1ServiceName + "/Watch"
	reflectV1     = "/" + grpcreflect.ReflectV1ServiceName + "/ServerReflectionInfo"
	reflectV1Beta = "/" + grpcreflect.ReflectV1AlphaServiceName + "/ServerReflectionInfo"
)

// served is one service: the procedures it answers and the handler that answers them.
type served struct {
	procedures []string
	handler    http.Handler
}

// services returns every service of the port: herald.v1.Herald, herald.v1.Queues,
// gRPC server reflection (v1, and v1alpha for older tools) and grpc.health.v1.Health.
func (s *Service) services() []served {
	_, herald := s.Handler()
	_, queues := s.QueuesHandler()
	opts := []connect.HandlerOption{connect.WithInterceptors(observer{s}, grants{})}
	if s.maxBody > 0 && s.maxBody <= math.MaxInt32 {
		opts = append(opts, connect.WithReadMaxBytes(int(s.maxBody)))
	}
	reflector := grpcreflect.NewStaticReflector(heraldv1connect.HeraldName, heraldv1connect.QueuesName,
		grpchealth.HealthV1ServiceName, grpcreflect.ReflectV1ServiceName, grpcreflect.ReflectV1AlphaServiceName)
	_, v1 := grpcreflect.NewHandlerV1(reflector, opts...)
	_, v1alpha := grpcreflect.NewHandlerV1Alpha(reflector, opts...)
	_, health := grpchealth.NewHandler(checker{s.ready}, opts...)
	return []served{
		{serviceProcedures(heraldv1connect.HeraldName), herald},
		{serviceProcedures(heraldv1connect.QueuesName), queues},
		{[]string{reflectV1}, v1},
		{[]string{reflectV1Beta}, v1alpha},
		{[]string{healthCheck, healthWatch}, health},
	}
}

// serviceProcedures lists the procedures of one of Herald's services, from its
// descriptor.
func serviceProcedures(name string) []string {
	var out []string
	services := heraldv1.File_herald_proto.Services()
	for i := 0; i < services.Len(); i++ {
		sd := services.Get(i)
		if string(sd.FullName()) != name {
			continue
		}
		for j := 0; j < sd.Methods().Len(); j++ {
			out = append(out, "/"+name+"/"+string(sd.Methods().Get(j).Name()))
		}
	}
	return out
}

// Procedures lists every procedure the port serves (Mount), as herald.Operations names
// them.
func (s *Service) Procedures() []string {
	var out []string
	for _, sv := range s.services() {
		out = append(out, sv.procedures...)
	}
	return out
}

// Mount registers every service of the port on mux, each procedure on its own path, and
// on "/" a handler that answers a call of any other procedure UNIMPLEMENTED (E4024) in
// the protocol the caller speaks — gRPC's trailers, or Connect's JSON error — and
// passes every request that is no RPC to fallback (the JSON API).
func (s *Service) Mount(mux *http.ServeMux, fallback http.Handler) {
	for _, sv := range s.services() {
		for _, p := range sv.procedures {
			mux.Handle(p, sv.handler)
		}
	}
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isRPC(r) {
			fallback.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		err := toConnect(herald.Errorf(herald.CodeUnknownMethod, "this server has no procedure %s; server reflection lists those it has", r.URL.Path))
		_ = errorWriter.Write(w, r, err)
		s.observe(r.Context(), call{procedure: r.URL.Path, unknown: true, peer: connect.Peer{Addr: r.RemoteAddr, Protocol: protocolOf(r)}, err: err, elapsed: time.Since(start)})
	}))
}

// isRPC reports whether r is a call in one of the RPC protocols: gRPC or gRPC-Web by
// its content type, a Connect stream by its, or a Connect unary call — a POST (or GET)
// that Connect's error writer can answer — to a path shaped like a procedure,
// "/package.Service/Method". The JSON API's paths have no such shape, so a JSON POST
// to one of them stays the JSON API's.
func isRPC(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "application/grpc") || strings.HasPrefix(ct, "application/connect+") {
		return true
	}
	return procedureShaped(r.URL.Path) && errorWriter.IsSupported(r)
}

// procedureShaped: path is "/pkg.Service/Method".
func procedureShaped(path string) bool {
	svc, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return ok && strings.Contains(svc, ".") && method != "" && !strings.Contains(method, "/")
}

// protocolOf names r's protocol as connect.Peer does.
func protocolOf(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "application/grpc-web"):
		return connect.ProtocolGRPCWeb
	case strings.HasPrefix(ct, "application/grpc"):
		return connect.ProtocolGRPC
	}
	return connect.ProtocolConnect
}

// checker answers grpc.health.v1.Health: SERVING while the server is ready (the same
// readiness as /readyz), NOT_SERVING otherwise, for the whole server ("") and for each
// of its services; another service name is not found.
type checker struct{ ready func() error }

func (c checker) Check(_ context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	switch req.Service {
	case "", heraldv1connect.HeraldName, heraldv1connect.QueuesName:
	default:
		return nil, connect.NewError(connect.CodeNotFound, errors.New("this server has no service "+req.Service))
	}
	if c.ready() != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}
