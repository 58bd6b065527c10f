package server

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/auth"
	"github.com/herald-mq/herald/console"
	"github.com/herald-mq/herald/httpapi"
	"github.com/herald-mq/herald/rpcapi"
)

// Authentication (Config.Auth): every request but the health checks (over HTTP and
// gRPC) acts for a principal — the one a bearer token was issued to, or the one a
// verified client certificate names (its subject's common name). A request from
// loopback that brings no credentials acts as "local", with every grant, unless
// Config.AuthLoopback; that is how the first principal and token are made on the
// server's own host. A browser on the console (/ui) brings its token in the console's
// HttpOnly cookie, which counts for the console's paths alone, and is shown the
// sign-in page when it brings none or a refused one.

// localPrincipal is a credential-less request from loopback.
var localPrincipal = &herald.Principal{Name: "local", Grants: []string{herald.ActAdmin}}

func (s *Server) authenticate(tokens func() *auth.Store, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if public(r) {
			next.ServeHTTP(w, r)
			return
		}
		p, until, err := s.principalOf(tokens(), r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="herald"`)
			if ui := s.console; ui != nil && isConsole(r) {
				ui.Unauthenticated(w, r, err) // a browser: the sign-in page
				return
			}
			if !rpcapi.WriteError(w, r, err) {
				httpapi.WriteError(w, err)
			}
			return
		}
		ctx := herald.WithPrincipal(r.Context(), p)
		if len(until) > 0 {
			// The request — a stream above all — ends when its credentials stop holding:
			// its token revoked, its principal's grants changed.
			var cancel context.CancelCauseFunc
			ctx, cancel = context.WithCancelCause(ctx)
			defer cancel(nil)
			for _, u := range until {
				stop := context.AfterFunc(u, func() { cancel(context.Cause(u)) })
				defer stop()
			}
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// principalOf authenticates r: its principal, and the contexts that end when that stops
// holding (see auth.Store.AuthenticateUntil).
func (s *Server) principalOf(store *auth.Store, r *http.Request) (*herald.Principal, []context.Context, error) {
	h := r.Header.Get("Authorization")
	if t := console.Token(r); h == "" && t != "" {
		h = "Bearer " + t // the console's cookie, for its own paths only
	}
	if h != "" {
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return nil, nil, herald.Errorf(herald.CodeUnauthenticated, "the Authorization header must be \"Bearer <token>\"")
		}
		if p, until := store.AuthenticateUntil(strings.TrimSpace(token)); p != nil {
			return p, until, nil
		}
		return nil, nil, herald.Errorf(herald.CodeUnauthenticated, "the bearer token is unknown or revoked")
	}
	local := !s.cfg.AuthLoopback && fromLoopback(r)
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		// A certificate speaks for the principal it names. One naming none is refused —
		// from loopback too, once the server has a principal: until then it acts as
		// "local", which is how the first principal is made under mutual TLS.
		cn := r.TLS.VerifiedChains[0][0].Subject.CommonName
		if p, until := store.PrincipalUntil(cn); p != nil {
			return p, []context.Context{until}, nil
		}
		if !local || !store.Empty() {
			return nil, nil, herald.Errorf(herald.CodeUnauthenticated, "the client certificate names %q, which is not a principal of this server", cn)
		}
	}
	if local {
		return localPrincipal, nil, nil
	}
	return nil, nil, herald.Errorf(herald.CodeUnauthenticated, "this server requires credentials: a bearer token (Authorization: Bearer …) or a client certificate")
}

// public: r is an operation that needs no credentials (herald.Operations: the health
// checks, over HTTP and gRPC), so a probe that brings none is answered.
func public(r *http.Request) bool {
	return herald.Operations[r.Method+" "+r.URL.Path].Public || herald.Operations[r.URL.Path].Public
}

// isConsole: r asks for a page of the console.
func isConsole(r *http.Request) bool {
	return r.URL.Path == console.Prefix || strings.HasPrefix(r.URL.Path, console.Prefix+"/")
}

func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authAPI serves the principal and token administration (the admin grant):
//
//	PUT    /v1/principals/{name}  {"grants": [...], "statement_timeout": "2s", "max_rows_scanned": n}
//	POST   /v1/tokens             {"principal", "label"}  → {"token", "id", ...} (shown once)
//	GET    /v1/tokens                                      → {"tokens": [...]}
//	DELETE /v1/tokens/{id}                                 revoke
//
// Each route is checked against its entry in herald.Operations before it runs.
func authAPI(tokens func() *auth.Store) (mux *http.ServeMux, routes []string) {
	mux = http.NewServeMux()
	handle := func(op string, h func(http.ResponseWriter, *http.Request, *auth.Store)) {
		routes = append(routes, op)
		mux.HandleFunc(op, func(w http.ResponseWriter, r *http.Request) {
			if err := herald.CheckOperation(herald.PrincipalFrom(r.Context()), op); err != nil {
				httpapi.WriteError(w, err)
				return
			}
			h(w, r, tokens())
		})
	}
	handle("PUT /v1/principals/{name}", func(w http.ResponseWriter, r *http.Request, store *auth.Store) {
		var body struct {
			Grants           []string `json:"grants"`
			StatementTimeout string   `json:"statement_timeout"`
			MaxRowsScanned   int      `json:"max_rows_scanned"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&body); err != nil {
			httpapi.WriteError(w, herald.Errorf(herald.CodeMalformedRequest, "want {\"grants\": [...]}: %v", err))
			return
		}
		lim := auth.Limits{MaxRowsScanned: body.MaxRowsScanned}
		if body.StatementTimeout != "" {
			d, err := time.ParseDuration(body.StatementTimeout)
			if err != nil {
				httpapi.WriteError(w, herald.Errorf(herald.CodeMalformedRequest, "statement_timeout %q: want a duration such as 2s", body.StatementTimeout))
				return
			}
			lim.StatementTimeout = d
		}
		if err := store.SetPrincipal(r.Context(), r.PathValue("name"), body.Grants, lim); err != nil {
			httpapi.WriteError(w, err)
			return
		}
		writeJSON(w, map[string]any{"principal": r.PathValue("name"), "grants": store.Principal(r.PathValue("name")).Grants})
	})
	handle("POST /v1/tokens", func(w http.ResponseWriter, r *http.Request, store *auth.Store) {
		var body struct {
			Principal string `json:"principal"`
			Label     string `json:"label"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&body); err != nil {
			httpapi.WriteError(w, herald.Errorf(herald.CodeMalformedRequest, "want {\"principal\": …, \"label\": …}: %v", err))
			return
		}
		token, t, err := store.Issue(r.Context(), body.Principal, body.Label)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		writeJSON(w, map[string]any{"token": token, "id": t.ID, "principal": t.Principal, "label": t.Label})
	})
	handle("GET /v1/tokens", func(w http.ResponseWriter, r *http.Request, store *auth.Store) {
		writeJSON(w, map[string]any{"tokens": store.Tokens()})
	})
	handle("DELETE /v1/tokens/{id}", func(w http.ResponseWriter, r *http.Request, store *auth.Store) {
		if err := store.Revoke(r.Context(), r.PathValue("id")); err != nil {
			httpapi.WriteError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux, routes
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
