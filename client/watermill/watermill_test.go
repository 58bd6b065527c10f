package watermill_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	wm "github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/client/watermill"
	"github.com/herald-mq/herald/heraldtest"
)

// waitTimeout bounds every wait of these tests for something the server does.
const waitTimeout = 10 * time.Second

// newPubSub returns a Publisher and a Subscriber in group on srv, both closed when the
// test ends.
func newPubSub(t *testing.T, srv *heraldtest.Server, cfg watermill.Config) (*watermill.Publisher, *watermill.Subscriber) {
	t.Helper()
	ctx := context.Background()
	pub, err := watermill.NewPublisher(ctx, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	sub, err := watermill.NewSubscriber(ctx, srv.Client(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sub.Close()
		_ = pub.Close()
	})
	return pub, sub
}

// receive returns the next message of msgs, failing the test if none comes in time.
func receive(t *testing.T, msgs <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-msgs:
		if !ok {
			t.Fatal("the subscription ended")
		}
		return m
	case <-time.After(waitTimeout):
		t.Fatal("no message received")
	}
	return nil
}

// expectNothing fails the test if msgs delivers a message within d.
func expectNothing(t *testing.T, msgs <-chan *message.Message, d time.Duration) {
	t.Helper()
	select {
	case m, ok := <-msgs:
		if ok {
			t.Fatalf("unexpected delivery of %s", m.UUID)
		}
	case <-time.After(d):
	}
}

// count runs a query returning one COUNT and returns it.
func count(t *testing.T, srv *heraldtest.Server, query string, params map[string]any) int64 {
	t.Helper()
	rows := srv.Exec(query, params).Last().Rows
	if len(rows) != 1 || len(rows[0]) != 1 {
		t.Fatalf("%s: rows %v, want one count", query, rows)
	}
	n, ok := rows[0][0].(int64)
	if !ok {
		t.Fatalf("%s: %T %v, want an integer", query, rows[0][0], rows[0][0])
	}
	return n
}

// eventually polls query, a COUNT, until it answers want, failing the test if it does
// not in time.
func eventually(t *testing.T, srv *heraldtest.Server, query string, params map[string]any, want int64) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		n := count(t, srv, query, params)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %v: %d, want %d", query, params, n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// declared reports whether typ is a declared node type on the server: declaring it
// again as an edge type is refused with TYPE_CONFLICT only then (an undeclared type is
// schemaless, and the declaration would simply succeed). The probe is rolled back.
func declared(t *testing.T, c *client.Client, typ string) bool {
	t.Helper()
	_, err := c.Exec(context.Background(),
		fmt.Sprintf("BEGIN; edge %s(a: Any); ROLLBACK", typ), nil)
	switch {
	case err == nil:
		return false
	case herald.CodeOf(err) == herald.CodeTypeConflict:
		return true
	default:
		t.Fatalf("probing %s: %v", typ, err)
		return false
	}
}

func TestEnsureSchemaDeclaresTypes(t *testing.T) {
	srv := heraldtest.NewServer(t)
	c := srv.Client()
	ctx := context.Background()

	// Concurrent callers on a fresh server all succeed.
	const callers = 8
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() { errs <- watermill.EnsureSchema(ctx, c) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("EnsureSchema: %v", err)
		}
	}
	for _, typ := range []string{watermill.MessageType, watermill.GroupType} {
		if !declared(t, c, typ) {
			t.Errorf("%s is not declared after EnsureSchema", typ)
		}
	}
	// A declared type checks its attributes.
	_, err := c.Exec(ctx, `SPAWN m: WatermillMessage { topic = 1 }`, nil)
	if herald.CodeOf(err) != herald.CodeTypeMismatch {
		t.Errorf("a WatermillMessage with an Int topic: %v, want %s", err, herald.CodeTypeMismatch)
	}
	// Calling it again changes nothing.
	if err := watermill.EnsureSchema(ctx, c); err != nil {
		t.Fatalf("EnsureSchema again: %v", err)
	}
}

func TestEnsureSchemaRefusesAConflictingDeclaration(t *testing.T) {
	srv := heraldtest.NewServer(t)
	srv.Exec(`node WatermillGroup { topic: Int }; SPAWN g: WatermillGroup { topic = 1 }`, nil)
	err := watermill.EnsureSchema(context.Background(), srv.Client())
	if herald.CodeOf(err) != herald.CodeAttributeInUse {
		t.Fatalf("EnsureSchema over another WatermillGroup: %v, want %s", err, herald.CodeAttributeInUse)
	}
}

func TestNamedGroupOnlyLeavesNoCopies(t *testing.T) {
	srv := heraldtest.NewServer(t)
	pub, sub := newPubSub(t, srv, watermill.Config{ConsumerGroup: "billing"})
	const topic, n = "orders", 5
	msgs, err := sub.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := pub.Publish(topic, message.NewMessage(wm.NewUUID(), fmt.Appendf(nil, "%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		receive(t, msgs).Ack()
	}
	expectNothing(t, msgs, 200*time.Millisecond)
	eventually(t, srv, `MATCH m: WatermillMessage WHERE m.topic = $t RETURN COUNT(m)`,
		map[string]any{"t": topic}, 0)
}

func TestDefaultGroupIsRegistered(t *testing.T) {
	srv := heraldtest.NewServer(t)
	_, sub := newPubSub(t, srv, watermill.Config{})
	if err := sub.SubscribeInitialize("orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Subscribe(context.Background(), "invoices"); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"orders", "invoices"} {
		n := count(t, srv, `MATCH g: WatermillGroup WHERE g.topic = $t AND g.grp = "" RETURN COUNT(g)`,
			map[string]any{"t": topic})
		if n != 1 {
			t.Errorf("topic %s: %d default-group registrations, want 1", topic, n)
		}
	}
}

func TestPublishWithoutGroupsKeepsOneCopy(t *testing.T) {
	srv := heraldtest.NewServer(t)
	pub, sub := newPubSub(t, srv, watermill.Config{})
	const topic = "orders"
	sent := message.NewMessage(wm.NewUUID(), []byte("early"))
	if err := pub.Publish(topic, sent); err != nil {
		t.Fatal(err)
	}
	query := `MATCH m: WatermillMessage WHERE m.topic = $t RETURN COUNT(m)`
	params := map[string]any{"t": topic}
	if n := count(t, srv, query, params); n != 1 {
		t.Fatalf("%d copies of a message published before any subscriber, want 1", n)
	}
	msgs, err := sub.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	got := receive(t, msgs)
	if got.UUID != sent.UUID {
		t.Fatalf("received %s, want %s", got.UUID, sent.UUID)
	}
	got.Ack()
	eventually(t, srv, query, params, 0)
}

func TestEveryGroupGetsEveryMessage(t *testing.T) {
	srv := heraldtest.NewServer(t)
	pub, def := newPubSub(t, srv, watermill.Config{})
	_, billing := newPubSub(t, srv, watermill.Config{ConsumerGroup: "billing"})
	const topic, n = "orders", 3
	ctx := context.Background()
	defMsgs, err := def.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	billingMsgs, err := billing.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := pub.Publish(topic, message.NewMessage(wm.NewUUID(), nil)); err != nil {
			t.Fatal(err)
		}
	}
	for _, msgs := range []<-chan *message.Message{defMsgs, billingMsgs} {
		for range n {
			receive(t, msgs).Ack()
		}
	}
	eventually(t, srv, `MATCH m: WatermillMessage WHERE m.topic = $t RETURN COUNT(m)`,
		map[string]any{"t": topic}, 0)
}

// nackUntilDeadLettered subscribes to a fresh topic with cfg, publishes one message and
// nacks every delivery of it. It fails the test unless the message is delivered exactly
// 1 + maxRedeliveries times and then dead-lettered.
func nackUntilDeadLettered(t *testing.T, cfg watermill.Config, maxRedeliveries int) {
	t.Helper()
	srv := heraldtest.NewServer(t)
	pub, sub := newPubSub(t, srv, cfg)
	const topic = "orders"
	msgs, err := sub.Subscribe(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	sent := message.NewMessage(wm.NewUUID(), []byte("poison"))
	if err := pub.Publish(topic, sent); err != nil {
		t.Fatal(err)
	}
	for range 1 + maxRedeliveries {
		m := receive(t, msgs)
		if m.UUID != sent.UUID {
			t.Fatalf("received %s, want %s", m.UUID, sent.UUID)
		}
		m.Nack()
	}
	eventually(t, srv, `MATCH d: _DeadLetter WHERE d.subject_type = $type `+
		`AND d.failure_reason = "max_redeliveries_exceeded" RETURN COUNT(d)`,
		map[string]any{"type": watermill.MessageType}, 1)
	expectNothing(t, msgs, 200*time.Millisecond)
	if n := count(t, srv, `MATCH m: WatermillMessage RETURN COUNT(m)`, nil); n != 0 {
		t.Fatalf("%d messages left after the dead letter, want 0", n)
	}
}

func TestMaxRedeliveriesDeadLetters(t *testing.T) {
	nackUntilDeadLettered(t, watermill.Config{MaxRedeliveries: 2}, 2)
}

func TestDefaultMaxRedeliveriesDeadLetters(t *testing.T) {
	if watermill.DefaultMaxRedeliveries < 1 || watermill.DefaultMaxRedeliveries > 100 {
		t.Fatalf("DefaultMaxRedeliveries = %d: want 1 to 100, so that a message that always "+
			"fails is dead-lettered after a few attempts", watermill.DefaultMaxRedeliveries)
	}
	nackUntilDeadLettered(t, watermill.Config{}, watermill.DefaultMaxRedeliveries)
}

// startServer starts an in-process server outside a test and returns its URL and a
// function that stops it.
func startServer() (url string, stop func()) {
	srv, err := heraldtest.Start(context.Background())
	if err != nil {
		panic(err)
	}
	return srv.URL(), func() { _ = srv.Close() }
}

func TestAckRightBeforeCloseIsKept(t *testing.T) {
	srv := heraldtest.NewServer(t)
	pub, err := watermill.NewPublisher(context.Background(), srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	const topic, rounds = "orders", 20
	for range rounds {
		sub, err := watermill.NewSubscriber(context.Background(), srv.Client(), watermill.Config{})
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := sub.Subscribe(context.Background(), topic)
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(topic, message.NewMessage(wm.NewUUID(), nil)); err != nil {
			t.Fatal(err)
		}
		receive(t, msgs).Ack()
		if err := sub.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, srv, `MATCH m: WatermillMessage RETURN COUNT(m)`, nil); n != 0 {
		t.Fatalf("%d of %d messages acked just before Close are left", n, rounds)
	}
}
