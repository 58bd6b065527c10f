package client_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// leasesHeld reads the server's count of leased, unsettled deliveries.
func leasesHeld(t *testing.T, srv *heraldtest.Server) float64 {
	t.Helper()
	resp, err := http.Get(srv.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "herald_consume_leases "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("herald_consume_leases is not in /metrics")
	return 0
}

// Once Close has returned, the server has let the subscription go: the messages it held
// unsettled are back in the queue, so a consumer started right after gets them first.
func TestCloseReturnsOnceTheServerReleasedTheLeases(t *testing.T) {
	srv := heraldtest.NewServer(t)
	srv.Exec(`node CJob { n: Int }`, nil)
	ctx := context.Background()
	c := srv.Client()
	for n := range 3 {
		if _, err := c.Publish(ctx, "CJob", map[string]any{"n": n}); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 20 {
		got := make(chan struct{}, 3)
		sub, err := c.Subscribe(ctx, `WATCH j: CJob [mode: consume] RETURN j.n AS n`,
			func(context.Context, *client.Message) error { got <- struct{}{}; return nil },
			client.WithPolicy(client.Manual), client.WithPrefetch(3))
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			<-got
		}
		if err := sub.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if n := leasesHeld(t, srv); n != 0 {
			t.Fatalf("round %d: %v leases still held once Close returned", round, n)
		}
	}
}
