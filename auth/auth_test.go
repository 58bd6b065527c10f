package auth_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/auth"
	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/pebblestore"
)

func openEngine(t *testing.T, dir string) *engine.Engine {
	t.Helper()
	b, err := pebblestore.Open(dir, pebblestore.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(context.Background(), engine.Config{Backend: b, Clock: clock.NewManual(time.Unix(1_800_000_000, 0)),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestTokensSurviveARestart: principals and token hashes are graph nodes; a token
// authenticates after a restart, a revoked one does not, and the token itself is
// nowhere in the graph.
func TestTokensSurviveARestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := openEngine(t, dir)
	s, err := auth.Open(e)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetPrincipal(ctx, "ann", []string{"read:Job", "settle:*"}, auth.Limits{StatementTimeout: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPrincipal(ctx, "bad", []string{"fly:Job"}, auth.Limits{}); herald.CodeOf(err) != herald.CodeMalformedRequest {
		t.Fatalf("an unknown action: %v", err)
	}
	if _, _, err := s.Issue(ctx, "nobody", ""); herald.CodeOf(err) != herald.CodeNotFound {
		t.Fatalf("a token for no principal: %v", err)
	}
	keep, _, err := s.Issue(ctx, "ann", "ci")
	if err != nil {
		t.Fatal(err)
	}
	gone, tk, err := s.Issue(ctx, "ann", "old")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke(ctx, tk.ID); err != nil {
		t.Fatal(err)
	}
	if p := s.Authenticate(gone); p != nil {
		t.Fatal("a revoked token authenticated")
	}
	r, err := e.Exec(ctx, "", `MATCH t: _Token RETURN t.hash`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Results[0].Rows) != 1 || r.Results[0].Rows[0][0].AsString() == keep {
		t.Fatalf("tokens in the graph: %v", r.Results[0].Rows)
	}
	_ = e.Close(ctx)

	e = openEngine(t, dir)
	defer e.Close(ctx)
	s, err = auth.Open(e)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Authenticate(keep)
	if p == nil || p.Name != "ann" || p.StatementTimeout != 2*time.Second || !p.Can(herald.ActRead, "Job") || p.Can(herald.ActRead, "Secret") || !p.Can(herald.ActSettle, "Secret") {
		t.Fatalf("after a restart: %+v", p)
	}
	if s.Authenticate(gone) != nil || s.Authenticate("hrd_made-up") != nil || s.Authenticate(keep+"x") != nil {
		t.Fatal("a token that was never issued, or revoked, authenticated")
	}
}
