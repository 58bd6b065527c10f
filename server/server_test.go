package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/herald-mq/herald/store/memstore"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// start starts s, failing the test if it does not start.
func start(t *testing.T, s *Server) {
	t.Helper()
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
}

func post(t *testing.T, addr, query string) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"query": query})
	resp, err := http.Post("http://"+addr+"/v1/query", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func TestStopBeforeStart(t *testing.T) {
	s := New(Config{Logger: quietLogger()})
	for i := 0; i < 2; i++ {
		if err := s.Stop(context.Background()); err != nil {
			t.Fatalf("Stop #%d: %v", i+1, err)
		}
	}
	if err := s.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("Start after Stop: %v", err)
	}
	<-s.Done()
	if s.Addr() != "" {
		t.Fatalf("Addr = %q", s.Addr())
	}
}

func TestDefaults(t *testing.T) {
	s := New(Config{})
	if s.cfg.DataDir != DefaultDataDir || s.cfg.Listen != DefaultListen || s.log == nil {
		t.Fatalf("defaults not applied: %+v", s.cfg)
	}
}

func TestServeAndRestart(t *testing.T) {
	dir := t.TempDir()
	s := New(Config{DataDir: dir, Listen: "127.0.0.1:0", Logger: quietLogger()})
	start(t, s)
	addr := s.Addr()
	if _, port, _ := net.SplitHostPort(addr); port == "0" || port == "" {
		t.Fatalf("Addr = %q", addr)
	}
	if code, body := post(t, addr, `node Job { status: String = "pending", priority: Int }`); code != 200 {
		t.Fatalf("declare: %d %v", code, body)
	}
	if code, body := post(t, addr, `SPAWN j: Job { priority = 5 }`); code != 200 {
		t.Fatalf("spawn: %d %v", code, body)
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", resp, err)
	}
	resp.Body.Close()
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if s.ready() == nil {
		t.Fatal("ready after Stop")
	}

	s2 := New(Config{DataDir: dir, Listen: "127.0.0.1:0", Logger: quietLogger()})
	start(t, s2)
	code, body := post(t, s2.Addr(), `MATCH j: Job WHERE j.priority > 3 RETURN j.status, j.priority`)
	if code != 200 {
		t.Fatalf("match after restart: %d %v", code, body)
	}
	rows, _ := json.Marshal(body["results"].([]any)[0].(map[string]any)["rows"])
	if string(rows) != `[["pending",5]]` {
		t.Fatalf("rows after restart: %s", rows)
	}
}

func TestStartFailureReleasesStore(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	s := New(Config{DataDir: dir, Listen: busy.Addr().String(), Logger: quietLogger()})
	err = s.Start(context.Background())
	if err == nil {
		_ = s.Stop(context.Background())
		t.Fatal("Start on a busy port succeeded")
	}
	// The failed Start closed the store, so another server can open the same dir.
	s2 := New(Config{DataDir: dir, Listen: "127.0.0.1:0", Logger: quietLogger()})
	start(t, s2)
}

func TestCustomBackend(t *testing.T) {
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger()})
	start(t, s)
	if code, body := post(t, s.Addr(), `SPAWN t: Thing { n = 1 }`); code != 200 {
		t.Fatalf("spawn: %d %v", code, body)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if s.Err() != nil {
		t.Fatalf("Err = %v", s.Err())
	}
}

// Closing a session twice: the second DELETE finds nothing to close, 404 E3004.
func TestCloseSessionTwice(t *testing.T) {
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger()})
	start(t, s)
	resp, err := http.Post("http://"+s.Addr()+"/v1/sessions", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var open struct{ Session string }
	err = json.NewDecoder(resp.Body).Decode(&open)
	resp.Body.Close()
	if err != nil || open.Session == "" {
		t.Fatalf("open: %v %+v", err, open)
	}
	for i, want := range []int{http.StatusNoContent, http.StatusNotFound} {
		req, _ := http.NewRequest(http.MethodDelete, "http://"+s.Addr()+"/v1/sessions/"+open.Session, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (i == 1 && !strings.Contains(string(body), `"E3004"`)) {
			t.Fatalf("DELETE #%d: %d %s, want %d", i+1, resp.StatusCode, body, want)
		}
	}
}
