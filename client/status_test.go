package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// A server on a store of its own says it leads, alone, at its own address.
func TestStatusOfASingleNode(t *testing.T) {
	srv := heraldtest.NewServer(t)
	st, err := srv.Client().Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Role != "leader" || st.Leader != srv.URL() || st.Address != srv.URL() || st.Term != 0 || len(st.Nodes) != 1 {
		t.Fatalf("status %+v, want the node leading alone at %s", st, srv.URL())
	}
	if n := st.Nodes[0]; n.Name != st.Name || n.Role != "leader" || n.Address != srv.URL() {
		t.Fatalf("node %+v", n)
	}
}

// h2cServer serves handler (and /healthz) over unencrypted HTTP/2, as the client needs.
func h2cServer(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{"status":"ok"}`) })
	mux.HandleFunc("GET /v1/cluster", handler)
	srv := httptest.NewUnstartedServer(mux)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func dialURL(t *testing.T, url string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), url, append(opts, client.WithLogger(slog.New(slog.DiscardHandler)))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

const clusterAnswer = `{"name":"b","role":"follower","address":"http://b:7421","leader":"http://a:7420","term":3,"seq":41,"store":"postgres",` +
	`"nodes":[{"name":"a","address":"http://a:7420","role":"leader","seq":42,"behind_seconds":0,"age_seconds":0.25},` +
	`{"name":"b","address":"http://b:7421","role":"follower","seq":41,"behind_seconds":1.5,"age_seconds":0.5}]}`

// Status reads GET /v1/cluster: durations in seconds become time.Duration, and
// NodeStatus writes itself back in the server's shape.
func TestStatusDecodesTheCluster(t *testing.T) {
	srv := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, clusterAnswer+"\n")
	})
	st, err := dialURL(t, srv.URL).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := client.ClusterStatus{Name: "b", Role: "follower", Address: "http://b:7421", Leader: "http://a:7420", Term: 3, Seq: 41, Store: "postgres",
		Nodes: []client.NodeStatus{
			{Name: "a", Address: "http://a:7420", Role: "leader", Seq: 42, Age: 250 * time.Millisecond},
			{Name: "b", Address: "http://b:7421", Role: "follower", Seq: 41, Behind: 1500 * time.Millisecond, Age: 500 * time.Millisecond},
		}}
	if got, _ := json.Marshal(st); string(got) != clusterAnswer {
		t.Fatalf("status written back:\n%s\nwant\n%s", got, clusterAnswer)
	}
	if len(st.Nodes) != 2 || st.Nodes[1] != want.Nodes[1] || st.Nodes[0] != want.Nodes[0] || st.Leader != want.Leader || st.Term != want.Term {
		t.Fatalf("status %+v, want %+v", st, want)
	}
}

// A coded refusal comes back with its code; a server that cannot be reached, or does
// not answer within the client's timeout, is E4025 with the cause kept; the caller's
// own cancellation is not.
func TestStatusErrors(t *testing.T) {
	ctx := context.Background()
	failing := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"code":"E5002","name":"STORAGE_FAILED","message":"reading the nodes from the store: connection refused"}}`)
	})
	if _, err := dialURL(t, failing.URL).Status(ctx); !errors.Is(err, herald.CodeStorage) {
		t.Fatalf("a refusal: %v", err)
	}

	gone := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {})
	c := dialURL(t, gone.URL)
	gone.Close()
	_, err := c.Status(ctx) // its connection is dropped, and no other is accepted
	var cause *url.Error
	if !errors.Is(err, herald.CodeUnreachable) || !errors.As(err, &cause) || !strings.Contains(err.Error(), "cannot reach "+gone.URL) {
		t.Fatalf("a server that is gone: %v", err)
	}

	release := make(chan struct{})
	slow := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	_, err = dialURL(t, slow.URL, client.WithTimeout(200*time.Millisecond)).Status(ctx)
	if !errors.Is(err, herald.CodeUnreachable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("a server that does not answer in time: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err = dialURL(t, slow.URL).Status(cancelled); errors.Is(err, herald.CodeUnreachable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled call: %v", err)
	}
}

// Status asks any node where the leader is, and how far each node has got. A server
// on a store of its own leads alone; one it cannot reach is E4025.
func ExampleClient_Status() {
	ctx := context.Background()
	srv, err := heraldtest.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(ctx, srv.URL(), client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	st, err := c.Status(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, leader at its own address: %v, %d node(s)\n", st.Role, st.Leader == srv.URL(), len(st.Nodes))
	for _, n := range st.Nodes {
		fmt.Printf("%s: %v, %s behind\n", n.Role, n.Address == srv.URL(), n.Behind)
	}

	srv.Close()
	_, err = c.Status(ctx)
	fmt.Println("once it has stopped:", herald.CodeOf(err))
	// Output:
	// leader, leader at its own address: true, 1 node(s)
	// leader: true, 0s behind
	// once it has stopped: E4025
}
