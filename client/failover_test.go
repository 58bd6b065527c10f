package client

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
)

// dialNodes dials the fakes' addresses (and any extra ones) as one cluster.
func dialNodes(t *testing.T, urls ...string) *Client {
	t.Helper()
	list := ""
	for i, u := range urls {
		if i > 0 {
			list += ","
		}
		list += u
	}
	c, err := Dial(context.Background(), list, WithLogger(slog.New(slog.DiscardHandler)), WithFailoverTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// deadAddress is an address nothing listens on.
func deadAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func TestCallsFollowTheLeaderAFollowerNames(t *testing.T) {
	follower, leader := newFakeServer(t), newFakeServer(t)
	follower.follower = leader.url()
	c := dialNodes(t, follower.url(), leader.url())
	for range 2 {
		if _, err := c.Exec(context.Background(), `SPAWN j: Job {}`, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(follower.drainStmts()); got != 1 {
		t.Errorf("the follower saw %d statements, want 1 (the first, refused; the second goes to the leader directly)", got)
	}
	if got := len(leader.drainStmts()); got != 2 {
		t.Errorf("the leader ran %d statements, want 2", got)
	}
}

func TestAFollowerAloneStillSendsTheCallToTheLeader(t *testing.T) {
	follower, leader := newFakeServer(t), newFakeServer(t)
	follower.follower = leader.url()
	c := dialNodes(t, follower.url()) // only the follower's address is known
	if _, err := c.Exec(context.Background(), `SPAWN j: Job {}`, nil); err != nil {
		t.Fatal(err)
	}
	if got := len(leader.drainStmts()); got != 1 {
		t.Errorf("the leader ran %d statements, want 1", got)
	}
}

func TestWithoutFailoverTheRefusalComesBack(t *testing.T) {
	follower, leader := newFakeServer(t), newFakeServer(t)
	follower.follower = leader.url()
	c, err := Dial(context.Background(), follower.url()+","+leader.url(), WithLogger(slog.New(slog.DiscardHandler)), WithFailoverTimeout(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Exec(context.Background(), `SPAWN j: Job {}`, nil)
	if herald.CodeOf(err) != herald.CodeNotLeader {
		t.Fatalf("err = %v, want E5006", err)
	}
}

func TestUnreachableNodesArePassedOver(t *testing.T) {
	leader := newFakeServer(t)
	dead := deadAddress(t)
	c := dialNodes(t, dead, leader.url())
	if _, err := c.Exec(context.Background(), `MATCH j: Job RETURN j`, nil); err != nil {
		t.Fatal(err)
	}

	// The node in use goes away: the next call finds another.
	a, b := newFakeServer(t), newFakeServer(t)
	c2 := dialNodes(t, a.url(), b.url())
	a.srv.Close()
	// A statement sent on the dead node's connection may have run or not, and comes back
	// as a failure rather than being sent twice; the call after it reaches b.
	ran := 0
	for range 2 {
		if _, err := c2.Exec(context.Background(), `SPAWN j: Job {}`, nil); err == nil {
			ran++
		}
	}
	if ran == 0 {
		t.Fatal("no statement reached the second node")
	}
	if got := len(b.drainStmts()); got != ran {
		t.Errorf("the second node ran %d statements, want %d", got, ran)
	}
}

func TestDialNeedsOneNodeAndNamesThoseThatFailed(t *testing.T) {
	dead1, dead2 := deadAddress(t), deadAddress(t)
	_, err := Dial(context.Background(), dead1+", "+dead2, WithLogger(slog.New(slog.DiscardHandler)))
	if err == nil {
		t.Fatal("Dial succeeded with no node answering")
	}
	for _, a := range []string{dead1, dead2} {
		if !contains(err.Error(), a) {
			t.Errorf("the error does not name %s: %v", a, err)
		}
	}
	if _, err := Dial(context.Background(), "http://a:1,ftp://b", WithLogger(slog.New(slog.DiscardHandler))); herald.CodeOf(err) != herald.CodeClientSetup {
		t.Errorf("a bad address in the list: %v, want E4018", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestARefusedPublishGoesOutAgainOnTheLeader(t *testing.T) {
	follower, leader := newFakeServer(t), newFakeServer(t)
	follower.follower = leader.url()
	c := dialNodes(t, follower.url(), leader.url())
	id, err := c.Publish(context.Background(), "Job", map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if id == "" {
		t.Fatal("no id")
	}
	select {
	case m := <-leader.published:
		if m.GetType() != "Job" {
			t.Fatalf("the leader got %v", m)
		}
	default:
		t.Fatal("the leader got nothing")
	}
}

func TestASubscriptionSubscribesAgainOnAnotherNode(t *testing.T) {
	a, b := newFakeServer(t), newFakeServer(t)
	c := dialNodes(t, a.url(), b.url())
	handled := make(chan *Message, 10)
	sub, err := c.Subscribe(context.Background(), consumeWatch, func(ctx context.Context, m *Message) error {
		handled <- m
		if m.DeliveryID == "d1" {
			<-ctx.Done() // held until its stream is lost
			return context.Cause(ctx)
		}
		return nil
	}, WithPolicy(Manual))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close(context.Background())
	st := a.nextStream(t)
	st.consumed("d1", 1, 1)
	m1 := recv(t, handled)

	// Node a goes away (the leader died; first its listener, so the client cannot come
	// back to it); b leads now.
	a.srv.Listener.Close()
	a.srv.CloseClientConnections()
	st2 := b.nextStream(t)
	if st2.query != consumeWatch {
		t.Fatalf("subscribed again with %q", st2.query)
	}
	<-m1.ctx.Done()
	if err := m1.Ack(context.Background()); err == nil {
		t.Error("a message of the lost stream was settled")
	}
	st2.consumed("d2", 1, 2)
	if m := recv(t, handled); m.DeliveryID != "d2" {
		t.Fatalf("handled %s, want d2", m.DeliveryID)
	} else if err := m.Ack(context.Background()); err != nil {
		t.Fatalf("settling on the new stream: %v", err)
	}
	if sub.Err() != nil {
		t.Fatalf("the subscription ended: %v", sub.Err())
	}
}

func TestASubscriptionOnOneNodeStillEndsWhenItsStreamDoes(t *testing.T) {
	f := newFakeServer(t)
	sub, st, _ := subscription(t, f, func(context.Context, *Message) error { return nil })
	close(st.out)
	select {
	case <-sub.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription did not end with its stream")
	}
	if sub.Err() == nil {
		t.Fatal("no error")
	}
	if errors.Is(sub.Err(), ErrClosed) {
		t.Fatalf("err = %v", sub.Err())
	}
}
