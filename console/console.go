// Package console serves Herald's web console at /ui: server-rendered pages over the
// seam (status, consume groups, watch streams, dead letters, queries, a live tail) with
// a little embedded script and no build step. Every page runs its statements as the
// request's principal, so it shows and does only what that principal's grants allow.
package console

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/internal/clock"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// CookieName is the cookie that carries a browser's bearer token after it has signed in:
// HttpOnly, SameSite=Strict, and limited to the console's path.
const CookieName = "herald_token"

// Prefix is where the console is mounted.
const Prefix = "/ui"

// Options configures a Handler.
type Options struct {
	// Logger receives a record for each failed page. nil means slog.Default().
	Logger *slog.Logger
	// Auth says whether the server authenticates requests; without it the console
	// offers no sign-in, as every request may do everything.
	Auth bool
	// Metrics, when set, reports the node's metrics; the queues page and /ui/stats take
	// each consume group's delayed, leased, oldest ready age and settlement totals from
	// its herald_consume_group_* series. nil leaves those figures out (a dash).
	Metrics func() []herald.Metric
	// Clock times the live tail's keep-alive comments; nil means the real clock.
	Clock herald.Clock
}

// Handler is the console. Create it with New.
type Handler struct {
	b       broker.Broker
	log     *slog.Logger
	auth    bool
	metrics func() []herald.Metric
	clock   herald.Clock
	mux     *http.ServeMux
	pages   map[string]*template.Template
	routes  []string
}

// New returns the console over a node.
func New(b broker.Broker, opts Options) *Handler {
	h := &Handler{b: b, log: opts.Logger, auth: opts.Auth, metrics: opts.Metrics, clock: opts.Clock, mux: http.NewServeMux(), pages: parsePages()}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.clock == nil {
		h.clock = clock.Real()
	}
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix(Prefix+"/static/", http.FileServerFS(static))
	h.handle("GET /ui/{$}", h.overview)
	h.handle("GET /ui/queues", h.queues)
	h.handle("GET /ui/streams", h.streams)
	h.handle("GET /ui/dead-letters", h.deadLetters)
	h.handle("POST /ui/dead-letters", h.actOnDeadLetters)
	h.handle("GET /ui/query", h.queryPage)
	h.handle("POST /ui/query", h.queryPage)
	h.handle("GET /ui/tail", h.tailPage)
	h.handle("GET /ui/tail/events", h.tailEvents)
	h.handle("GET /ui/stats", h.stats)
	h.handle("GET /ui/static/", files.ServeHTTP)
	h.handle("GET /ui/login", h.loginPage)
	h.handle("POST /ui/login", h.login)
	h.handle("POST /ui/logout", h.logout)
	h.mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, herald.Errorf(herald.CodeNotFound, "the console has no page %s", r.URL.Path))
	})
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Routes lists the operations the console serves, as herald.Operations names them.
func (h *Handler) Routes() []string { return slices.Clone(h.routes) }

// handle registers fn on op ("METHOD pattern"). The wrapper checks op's entry in
// herald.Operations, refuses a principal that holds no grant at all (E4013: there is
// nothing the console could show it), and refuses a form posted from another origin.
func (h *Handler) handle(op string, fn http.HandlerFunc) {
	h.routes = append(h.routes, op)
	public := herald.Operations[op].Public
	h.mux.HandleFunc(op, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "same-origin")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:")
		if r.Method == http.MethodPost && !sameOrigin(r) {
			h.fail(w, r, herald.Errorf(herald.CodePermissionDenied, "a console form must be posted from the console's own origin"))
			return
		}
		p := herald.PrincipalFrom(r.Context())
		if err := herald.CheckOperation(p, op); err != nil {
			h.fail(w, r, err)
			return
		}
		if !public && p != nil && len(p.Grants) == 0 {
			h.fail(w, r, herald.Errorf(herald.CodePermissionDenied, "%s holds no grants, so the console has nothing it may show", p.Name))
			return
		}
		fn(w, r)
	})
}

// sameOrigin reports whether a posted form comes from a page of this host: the
// browser's Origin header (or, without it, its Referer) names the request's host. With
// the SameSite cookie this keeps another site's page from posting as the operator.
func sameOrigin(r *http.Request) bool {
	from := r.Header.Get("Origin")
	if from == "" || from == "null" {
		from = r.Header.Get("Referer")
	}
	if from == "" {
		return false
	}
	u, err := url.Parse(from)
	return err == nil && u.Host == r.Host
}

// page is what every template gets: the principal, the navigation and the page's own
// data.
type page struct {
	Title     string
	Nav       string
	Principal string
	Auth      bool
	Error     *errorView
	Data      any
}

// errorView is a coded error as a page shows it.
type errorView struct {
	Code    herald.Code
	Name    string
	Message string
	Status  int
}

func viewOf(err error) *errorView {
	if err == nil {
		return nil
	}
	he := herald.AsError(err)
	info := he.Code.Info()
	return &errorView{Code: info.Code, Name: info.Name, Message: he.Message, Status: info.HTTP}
}

// render writes the page template name with data and status.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any, err error) {
	p := page{Title: title, Nav: name, Auth: h.auth, Data: data, Error: viewOf(err)}
	if pr := herald.PrincipalFrom(r.Context()); pr != nil {
		p.Principal = pr.Name
	}
	var buf bytes.Buffer
	if e := h.pages[name].ExecuteTemplate(&buf, "layout", p); e != nil {
		h.log.Error("console: rendering a page", "page", name, "err", e)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail answers err as the error page, with its code's status.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	v := viewOf(err)
	h.render(w, r, v.Status, "error", v.Name, nil, err)
}

// Unauthenticated answers a console request whose credentials were refused: the
// sign-in page, with the refusal's code (401).
func (h *Handler) Unauthenticated(w http.ResponseWriter, r *http.Request, err error) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Path: Prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	h.render(w, r, viewOf(err).Status, "login", "Sign in", nil, err)
}

// Token returns the bearer token a console request carries in its cookie, or "". The
// server authenticates it like an Authorization header, for paths under Prefix only.
func Token(r *http.Request) string {
	if r.URL.Path != Prefix && !strings.HasPrefix(r.URL.Path, Prefix+"/") {
		return ""
	}
	c, err := r.Cookie(CookieName)
	if err != nil {
		return ""
	}
	return c.Value
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "login", "Sign in", nil, nil)
}

// login keeps the token of the form in the console's cookie and goes to the overview;
// the next request authenticates it.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		h.render(w, r, http.StatusBadRequest, "login", "Sign in", nil, herald.Errorf(herald.CodeMalformedRequest, "give the bearer token the server issued you"))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: Prefix, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: int((12 * time.Hour).Seconds())})
	http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Path: Prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
}

// parsePages parses each page template with the layout it shares.
func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{"value": showValue, "age": showAge, "fig": showFig}
	layout := template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	names, _ := fs.Glob(templateFS, "templates/*.html")
	out := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		out[name] = template.Must(template.Must(layout.Clone()).ParseFS(templateFS, n))
	}
	return out
}
