package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/store/memstore"
)

// TestConsoleCookie: the console's cookie authenticates requests under /ui and no
// others; a principal without grants is refused the console (403 E4013), a revoked
// token gets the sign-in page (401 E4014) and loses its cookie, and /ui leads to /ui/.
func TestConsoleCookie(t *testing.T) {
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger(), Auth: true})
	start(t, s)
	ctx := context.Background()
	admin, err := client.Dial(ctx, "http://"+s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.SetPrincipal(ctx, herald.Principal{Name: "nobody", Grants: []string{}}); err != nil {
		t.Fatal(err)
	}
	token, id, err := admin.CreateToken(ctx, "nobody", "test")
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string, *http.Response) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+s.Addr()+path, nil)
		req.AddCookie(&http.Cookie{Name: "herald_token", Value: token})
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp
	}
	if code, body, _ := get("/ui/"); code != http.StatusForbidden || !strings.Contains(body, "E4013") {
		t.Errorf("/ui/ with nobody's cookie: %d %.300s", code, body)
	}
	// Outside /ui the cookie does not count: a loopback client without credentials acts
	// as local.
	if code, body, _ := get("/v1/cluster"); code != http.StatusOK {
		t.Errorf("/v1/cluster with the cookie: %d %.300s", code, body)
	}
	if code, _, resp := get("/ui"); code/100 != 3 || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("/ui: %d %v", code, resp.Header)
	}
	if err := admin.RevokeToken(ctx, id.ID); err != nil {
		t.Fatal(err)
	}
	code, body, resp := get("/ui/queues")
	if code != http.StatusUnauthorized || !strings.Contains(body, "E4014") || !strings.Contains(body, `id="token"`) ||
		!strings.Contains(resp.Header.Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("a revoked token: %d %v %.300s", code, resp.Header, body)
	}
}
