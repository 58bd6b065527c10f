package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/internal/clock"
)

func nextWatchEvent(t *testing.T, w *Watch) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := w.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return ev
}

const taskWatch = `WATCH t: Task WHERE t.status = $s [delivery: reliable] RETURN t`

// openFakeWatch opens taskWatch on c with opts and returns it with its connection on
// the fake server f.
func openFakeWatch(t *testing.T, f *fakeServer, c *Client, opts ...WatchOption) (*Watch, *fakeWatch) {
	t.Helper()
	w, err := c.Watch(context.Background(), taskWatch, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return w, f.nextWatch(t)
}

func TestWatchDecodesEvents(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	w, conn := openFakeWatch(t, f, c, WithParams(map[string]any{"s": "done"}), WithSession("s1"))
	defer w.Close()
	if conn.query != taskWatch || fmt.Sprint(conn.params) != `map[s:done]` || conn.session != "s1" || conn.after != 0 {
		t.Fatalf("request: %+v", conn)
	}
	conn.send(`{"type":"initial","match":{"id":"t1","_type":"Task","n":1,"x":1.5},"seq":3,"tick":3}`)
	conn.send(`{"type":"changed","match":{"id":"t1","n":2},"prev":{"id":"t1","n":1},"seq":4,"tick":4}`)
	conn.send(`{"type":"gap","count":5,"seq":9,"tick":9}`)
	conn.send(`{"type":"reset","code":"E6001","message":"too old","seq":9,"tick":9}`)
	conn.send(`{"type":"heartbeat","seq":10,"tick":12}`)
	conn.send(`{"type":"added","match":7,"seq":11,"tick":13}`)

	if w.Position() != 0 {
		t.Fatalf("position before any event: %d", w.Position())
	}
	ev := nextWatchEvent(t, w)
	if ev.Type != herald.EventInitial || ev.Seq != 3 || ev.Tick != 3 || ev.Match["id"] != "t1" || ev.Match["n"] != int64(1) || ev.Match["x"] != 1.5 || ev.Prev != nil {
		t.Fatalf("initial: %+v", ev)
	}
	if w.Position() != 3 {
		t.Fatalf("position %d, want 3", w.Position())
	}
	if ev = nextWatchEvent(t, w); ev.Type != herald.EventChanged || ev.Match["n"] != int64(2) || ev.Prev["n"] != int64(1) {
		t.Fatalf("changed: %+v", ev)
	}
	if ev = nextWatchEvent(t, w); ev.Type != herald.EventGap || ev.Count != 5 || ev.Seq != 9 {
		t.Fatalf("gap: %+v", ev)
	}
	if ev = nextWatchEvent(t, w); ev.Type != herald.EventReset || ev.Code != herald.CodeCompacted || ev.Message != "too old" {
		t.Fatalf("reset: %+v", ev)
	}
	if ev = nextWatchEvent(t, w); ev.Type != herald.EventHeartbeat || ev.Seq != 10 || ev.Tick != 12 {
		t.Fatalf("heartbeat: %+v", ev)
	}
	if ev = nextWatchEvent(t, w); ev.Type != herald.EventAdded || ev.Match["value"] != int64(7) {
		t.Fatalf("added with a scalar match: %+v", ev)
	}
	if w.Position() != 11 {
		t.Fatalf("position %d, want 11", w.Position())
	}
}

// A dropped connection is reopened with Last-Event-ID set to the last position, and the
// stream goes on where it was.
func TestWatchReconnectsAfterADrop(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	w, conn := openFakeWatch(t, f, c, ResumeAfter(2), WithSession("s1"))
	defer w.Close()
	if conn.after != 2 || w.Position() != 2 {
		t.Fatalf("ResumeAfter(2): after %d, position %d", conn.after, w.Position())
	}
	conn.send(`{"type":"added","match":{"id":"a"},"seq":5,"tick":5}`)
	conn.send(`{"type":"removed","match":{"id":"b"},"seq":6,"tick":6}`)
	if ev := nextWatchEvent(t, w); ev.Seq != 5 {
		t.Fatalf("%+v", ev)
	}
	if ev := nextWatchEvent(t, w); ev.Seq != 6 {
		t.Fatalf("%+v", ev)
	}
	close(conn.out) // the connection drops

	conn2 := f.nextWatch(t)
	if conn2.after != 6 || conn2.session != "s1" || conn2.query != taskWatch {
		t.Fatalf("reconnect: %+v", conn2)
	}
	conn2.send(`{"type":"added","match":{"id":"c"},"seq":7,"tick":7}`)
	if ev := nextWatchEvent(t, w); ev.Seq != 7 || ev.Match["id"] != "c" {
		t.Fatalf("after reconnect: %+v", ev)
	}

	// The server is briefly unavailable: the watch tries again.
	f.mu.Lock()
	f.refuse = append(f.refuse, herald.Errorf(herald.CodeShuttingDown, "stopping"))
	f.mu.Unlock()
	close(conn2.out)
	conn3 := f.nextWatch(t)
	if conn3.after != 7 {
		t.Fatalf("second reconnect: after %d", conn3.after)
	}
	conn3.send(`{"type":"added","match":{"id":"d"},"seq":8,"tick":8}`)
	if ev := nextWatchEvent(t, w); ev.Seq != 8 {
		t.Fatalf("after the second reconnect: %+v", ev)
	}

	// An error the server means (not a passing one) ends the watch.
	f.mu.Lock()
	f.refuse = append(f.refuse, herald.Errorf(herald.CodeNotImplemented, "no resume for joins"))
	f.mu.Unlock()
	close(conn3.out)
	_, err := w.Next(context.Background())
	if herald.CodeOf(err) != herald.CodeNotImplemented {
		t.Fatalf("refused reconnect: %v", err)
	}
}

func TestWatchWithoutReconnect(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	w, conn := openFakeWatch(t, f, c, WithReconnect(0))
	defer w.Close()
	conn.send(`{"type":"initial","match":{"id":"a"},"seq":1,"tick":1}`)
	close(conn.out)
	if ev := nextWatchEvent(t, w); ev.Seq != 1 {
		t.Fatalf("%+v", ev)
	}
	_, err := w.Next(context.Background())
	if err == nil || errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "connection lost") {
		t.Fatalf("drop without reconnect: %v", err)
	}
	select {
	case c := <-f.watches:
		t.Fatalf("reconnected: %+v", c)
	default:
	}
}

func TestWatchErrorEventEndsTheWatch(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	w, conn := openFakeWatch(t, f, c)
	defer w.Close()
	conn.send(`{"type":"added","match":{"id":"a"},"seq":1,"tick":1}`)
	conn.fail(herald.Errorf("E8005", "buffer full"))
	if ev := nextWatchEvent(t, w); ev.Seq != 1 {
		t.Fatalf("%+v", ev)
	}
	for range 2 { // the error stays
		_, err := w.Next(context.Background())
		var he *herald.Error
		if !errors.As(err, &he) || he.Code != "E8005" || he.Message != "buffer full" {
			t.Fatalf("error event: %v", err)
		}
	}
	<-w.Done()
	select {
	case c := <-f.watches:
		t.Fatalf("reconnected after an error event: %+v", c)
	default:
	}
}

func TestWatchClose(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	w, conn := openFakeWatch(t, f, c)
	got := make(chan error, 1)
	go func() {
		_, err := w.Next(context.Background())
		got <- err
	}()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, io.EOF) {
		t.Fatalf("Next during Close: %v", err)
	}
	if _, err := w.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("Next after Close: %v", err)
	}
	_ = w.Close() // idempotent
	select {
	case <-conn.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the server still holds the connection")
	}
	select {
	case c := <-f.watches:
		t.Fatalf("reconnected after Close: %+v", c)
	default:
	}

	// Next's own context bounds only that call.
	w2, _ := openFakeWatch(t, f, c)
	defer w2.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w2.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context: %v", err)
	}
}

// Events the watch's reader has decoded and handed over, but Next has not returned, are
// not returned after Close: Close ends the watch, whatever is waiting.
func TestWatchCloseDropsEventsHandedOver(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	w, conn := openFakeWatch(t, f, c)
	for i := range 3 {
		conn.send(fmt.Sprintf(`{"type":"added","match":{"id":"t%d"},"seq":%d,"tick":%d}`, i, i+1, i+1))
	}
	for end := time.Now().Add(10 * time.Second); len(w.events) < 3; {
		if time.Now().After(end) {
			t.Fatalf("%d events handed over, want 3", len(w.events))
		}
		time.Sleep(time.Millisecond)
	}
	if ev := nextWatchEvent(t, w); ev.Seq != 1 {
		t.Fatalf("first event: %+v", ev)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if ev, err := w.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("Next after Close: %+v, %v; want io.EOF", ev, err)
	}
}

func TestWatchAll(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	w, conn := openFakeWatch(t, f, c)
	for i := uint64(1); i <= 3; i++ {
		conn.send(fmt.Sprintf(`{"type":"added","match":{"id":"t%d"},"seq":%d,"tick":%d}`, i, i, i))
	}
	var seqs []uint64
	var last error
	for ev, err := range w.All(context.Background()) {
		if err != nil {
			last = err
			continue // the error is the last pair
		}
		seqs = append(seqs, ev.Seq)
		if len(seqs) == 3 {
			conn.fail(herald.Errorf("E8005", "full"))
		}
	}
	if fmt.Sprint(seqs) != "[1 2 3]" || herald.CodeOf(last) != "E8005" {
		t.Fatalf("All: %v, then %v", seqs, last)
	}

	// After Close, All just stops.
	w2, err := c.Watch(context.Background(), taskWatch)
	if err != nil {
		t.Fatal(err)
	}
	f.nextWatch(t)
	w2.Close()
	for ev, err := range w2.All(context.Background()) {
		t.Fatalf("All after Close yielded %+v, %v", ev, err)
	}
}

func TestWatchRefusals(t *testing.T) {
	f := newFakeServer(t)
	c := f.dial(t)
	ctx := context.Background()
	if _, err := c.Watch(ctx, taskWatch, WithPolicy(Manual)); err == nil {
		t.Fatal("a Subscribe option was accepted")
	}
	if _, err := c.Watch(ctx, taskWatch, WithReconnect(-1)); err == nil {
		t.Fatal("a negative reconnect was accepted")
	}
	f.mu.Lock()
	f.refuse = append(f.refuse, herald.Errorf(herald.CodeSyntax, "bad").At(1, 3))
	f.mu.Unlock()
	_, err := c.Watch(ctx, taskWatch)
	var he *herald.Error
	if !errors.As(err, &he) || he.Code != "E1001" || he.Line != 1 {
		t.Fatalf("refused statement: %v", err)
	}
}

// A reconnect after a failed one waits its backoff on the client's clock (WithClock),
// and the stream goes on once the clock has moved past it.
func TestWatchReconnectBackoffReadsTheClock(t *testing.T) {
	f := newFakeServer(t)
	clk := clock.NewManual(time.Unix(1700000000, 0))
	c, err := Dial(context.Background(), f.url(), WithLogger(slog.New(slog.DiscardHandler)), WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, conn := openFakeWatch(t, f, c)
	defer w.Close()
	conn.send(`{"type":"added","match":{"id":"a"},"seq":5,"tick":5}`)
	if ev := nextWatchEvent(t, w); ev.Seq != 5 {
		t.Fatalf("%+v", ev)
	}
	timers := clk.Pending()
	f.mu.Lock()
	f.refuse = append(f.refuse, herald.Errorf(herald.CodeShuttingDown, "stopping"))
	f.mu.Unlock()
	close(conn.out) // dropped; the first reconnect is refused, the second waits
	for deadline := time.Now().Add(10 * time.Second); clk.Pending() == timers; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no backoff timer after a refused reconnect")
		}
	}
	select {
	case conn2 := <-f.watches:
		t.Fatalf("reconnected before the clock moved: %+v", conn2)
	case <-time.After(400 * time.Millisecond): // past the most a first backoff waits
	}
	clk.Advance(250 * time.Millisecond)
	if conn2 := f.nextWatch(t); conn2.after != 5 {
		t.Fatalf("reconnect after %d, want 5", conn2.after)
	}
}
