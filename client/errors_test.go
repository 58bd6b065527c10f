package client_test

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// Misuses of the client carry codes of their own, never INTERNAL, and match both the
// code and, where there is one, the sentinel.
func TestUsageErrorsHaveCodes(t *testing.T) {
	srv := heraldtest.NewServer(t)
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *client.Message) error { return nil }
	watch := `WATCH j: Job [mode: consume] RETURN j`
	_, nilHandler := c.Subscribe(ctx, watch, nil)
	_, badPrefetch := c.Subscribe(ctx, watch, noop, client.WithPrefetch(-1))
	_, badType := c.Publish(ctx, "not a type", nil)
	_, badParam := c.Exec(ctx, `RETURN $p`, map[string]any{"p": struct{}{}})
	_, badOption := c.Watch(ctx, `WATCH j: Job RETURN j`, client.WithPolicy(client.Ack))
	_, badURL := client.Dial(ctx, "ftp://example.com")
	_, noCA := client.LoadTLSConfig(filepath.Join(t.TempDir(), "nothing.pem"), "", "")
	m := &client.Message{}
	_ = m.Ack(ctx)
	twice := m.Nack(ctx)
	c.Close()
	_, closed := c.Exec(ctx, `RETURN 1`, nil)

	for _, tc := range []struct {
		name string
		err  error
		code herald.Code
		also error
	}{
		{"nil handler", nilHandler, herald.CodeInvalidArgument, nil},
		{"negative prefetch", badPrefetch, herald.CodeInvalidArgument, nil},
		{"publish type", badType, herald.CodeInvalidArgument, nil},
		{"parameter", badParam, herald.CodeInvalidArgument, nil},
		{"Subscribe option on Watch", badOption, herald.CodeInvalidArgument, nil},
		{"url scheme", badURL, herald.CodeClientSetup, nil},
		{"missing CA file", noCA, herald.CodeClientSetup, fs.ErrNotExist},
		{"second settlement", twice, herald.CodeAlreadySettled, client.ErrSettled},
		{"closed client", closed, herald.CodeClientClosed, client.ErrClosed},
	} {
		if !errors.Is(tc.err, tc.code) || herald.CodeOf(tc.err) != tc.code {
			t.Errorf("%s: %v (code %s), want %s", tc.name, tc.err, herald.CodeOf(tc.err), tc.code)
		}
		if tc.also != nil && !errors.Is(tc.err, tc.also) {
			t.Errorf("%s: %v does not match %v", tc.name, tc.err, tc.also)
		}
		var he *herald.Error
		if !errors.As(tc.err, &he) {
			t.Errorf("%s: %v does not unwrap to *herald.Error", tc.name, tc.err)
		}
	}
	if errors.Is(closed, client.ErrSubscriptionClosed) {
		t.Error("ErrClosed matches ErrSubscriptionClosed: sentinels of one code must stay apart")
	}
}

// What the server raises comes back as *herald.Error, matchable with errors.Is against
// its code alone: a query error, and a lease that expired before its ACK.
func TestServerErrorsMatchTheirCodes(t *testing.T) {
	srv := heraldtest.NewServer(t, heraldtest.WithManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))
	ctx := context.Background()
	c := srv.Client()
	_, err := c.Exec(ctx, `MATCH j: Job RETURN ]`, nil)
	var he *herald.Error
	if !errors.Is(err, herald.CodeSyntax) || errors.Is(err, herald.CodeInternal) || !errors.As(err, &he) || he.Line != 1 {
		t.Fatalf("syntax error: %v", err)
	}

	srv.Exec(`node Slow { n: Int } SPAWN s: Slow { n = 1 }`, nil)
	got := make(chan *client.Message, 1)
	mustSubscribe(t, c, `WATCH s: Slow [mode: consume, ack_timeout: 5s] RETURN s`,
		func(_ context.Context, m *client.Message) error { got <- m; return nil }, client.WithPolicy(client.Manual))
	m := recvT(t, got)
	srv.Advance(6 * time.Second)
	// The server refuses the ACK (E8004), or the client does once the timeout event has
	// reached it (E8003): either way the code matches.
	err = m.Ack(ctx)
	if !errors.Is(err, herald.CodeAckTimeout) && !errors.Is(err, herald.CodeInvalidDeliveryID) {
		t.Fatalf("Ack after expiry: %v, want E8003 or E8004", err)
	}
	if !errors.As(err, &he) {
		t.Fatalf("Ack after expiry: %v does not unwrap to *herald.Error", err)
	}
}
