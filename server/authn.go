package server

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/auth"
	"github.com/herald-mq/herald/httpapi"
)

// Authentication (Config.Auth): every request but the health checks acts for a
// principal — the one a bearer token was issued to, or the one a verified client
// certificate names (its subject's common name). A request from loopback that brings
// no credentials acts as "local", with every grant, unless Config.AuthLoopback; that
// is how the first principal and token are made on the server's own host.

// localPrincipal is a credential-less request from loopback.
var localPrincipal = &herald.Principal{Name: "local", Grants: []string{herald.ActAdmin}}

func (s *Server) authenticate(store *auth.Store, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			next.ServeHTTP(w, r)
			return
		}
		p, err := s.principalOf(store, r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="herald"`)
			httpapi.WriteError(w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(herald.WithPrincipal(r.Context(), p)))
	})
}

func (s *Server) principalOf(store *auth.Store, r *http.Request) (*herald.Principal, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return nil, herald.Errorf(herald.CodeUnauthenticated, "the Authorization header must be \"Bearer <token>\"")
		}
		if p := store.Authenticate(strings.TrimSpace(token)); p != nil {
			return p, nil
		}
		return nil, herald.Errorf(herald.CodeUnauthenticated, "the bearer token is unknown or revoked")
	}
	var cn string
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		cn = r.TLS.VerifiedChains[0][0].Subject.CommonName
		if p := store.Principal(cn); p != nil {
			return p, nil
		}
	}
	if !s.cfg.AuthLoopback && fromLoopback(r) {
		return localPrincipal, nil
	}
	if cn != "" {
		return nil, herald.Errorf(herald.CodeUnauthenticated, "the client certificate names %q, which is not a principal of this server", cn)
	}
	return nil, herald.Errorf(herald.CodeUnauthenticated, "this server requires credentials: a bearer token (Authorization: Bearer …) or a client certificate")
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
func authAPI(store *auth.Store) *http.ServeMux {
	mux := http.NewServeMux()
	admin := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if err := herald.PrincipalFrom(r.Context()).Check(herald.ActAdmin, ""); err != nil {
				httpapi.WriteError(w, err)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("PUT /v1/principals/{name}", admin(func(w http.ResponseWriter, r *http.Request) {
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
	}))
	mux.HandleFunc("POST /v1/tokens", admin(func(w http.ResponseWriter, r *http.Request) {
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
	}))
	mux.HandleFunc("GET /v1/tokens", admin(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"tokens": store.Tokens()})
	}))
	mux.HandleFunc("DELETE /v1/tokens/{id}", admin(func(w http.ResponseWriter, r *http.Request) {
		if err := store.Revoke(r.Context(), r.PathValue("id")); err != nil {
			httpapi.WriteError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
