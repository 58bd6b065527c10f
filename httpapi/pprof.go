package httpapi

import (
	"net/http"
	"net/http/pprof"
)

// pprofHandler serves the Go runtime's profiles under /debug/pprof/ (net/http/pprof):
// the index, the named profiles (heap, goroutine, allocs, block, mutex,
// threadcreate), and the CPU profile, the execution trace, the command line and symbol
// look-ups. The route needs the admin grant (herald.Operations), so with --auth only an
// administrator may profile the server: a profile shows its code, a trace its timing.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
