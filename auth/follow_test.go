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
	"github.com/herald-mq/herald/store/memstore"
)

type keep struct{ *memstore.Store }

func (keep) Close() error { return nil }

// A follower's store learns of principals and tokens made and revoked on the leader:
// a token issued there authenticates on the follower, and its revocation ends what it
// authenticated there too.
func TestFollowerSeesTokens(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := memstore.New()
	leader, err := engine.Open(ctx, engine.Config{Backend: st, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close(ctx)
	follower, err := engine.Open(ctx, engine.Config{Backend: keep{st}, Logger: quiet, Follower: true})
	if err != nil {
		t.Fatal(err)
	}
	defer follower.Close(ctx)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_ = follower.Follow(fctx, func(ctx context.Context, _ uint64) error {
			select {
			case <-time.After(5 * time.Millisecond): // the store's poll
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()

	onLeader, err := auth.Open(leader)
	if err != nil {
		t.Fatal(err)
	}
	onFollower, err := auth.Open(follower)
	if err != nil {
		t.Fatal(err)
	}
	defer onFollower.Follow()()

	if err := onLeader.SetPrincipal(ctx, "app", []string{"read:Job"}, auth.Limits{}); err != nil {
		t.Fatal(err)
	}
	token, tok, err := onLeader.Issue(ctx, "app", "ci")
	if err != nil {
		t.Fatal(err)
	}
	var p *herald.Principal
	var until []context.Context
	waitUntil(t, "the token to authenticate on the follower", func() bool {
		p, until = onFollower.AuthenticateUntil(token)
		return p != nil
	})
	if p.Name != "app" || len(p.Grants) != 1 {
		t.Fatalf("principal %+v", p)
	}
	if err := onLeader.Revoke(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the revocation to reach the follower", func() bool { return onFollower.Authenticate(token) == nil })
	// A request ends when any of its contexts does.
	waitUntil(t, "what the revoked token authenticated to end", func() bool {
		for _, u := range until {
			if u.Err() != nil {
				return true
			}
		}
		return false
	})
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
