package watermill_test

import (
	"context"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/client/watermill"
	"github.com/herald-mq/herald/heraldtest"
)

// features are the ones the adapter declares in its README.
var features = tests.Features{
	ConsumerGroups:                      true,
	ExactlyOnceDelivery:                 false,
	GuaranteedOrder:                     false,
	GuaranteedOrderWithSingleSubscriber: false,
	Persistent:                          true,
	RestartServiceCommand:               nil,
	RequireSingleInstance:               false,
	NewSubscriberReceivesOldMessages:    false,
	// Only a message's payload and metadata are stored, so its context at Publish does
	// not reach subscribers. A received message's context derives from the Subscribe
	// context and is cancelled after Ack or Nack and when the subscription ends, which
	// TestMessageCtx checks when this is false.
	ContextPreserved: false,
}

// suiteMaxRedeliveries replaces DefaultMaxRedeliveries for the conformance suite, which
// assumes that a nacked message is retried for ever: TestContinueAfterErrors nacks up
// to 300 deliveries in a row, and since a nacked message comes back at its place at
// the head of the queue, they can all be deliveries of the same message.
const suiteMaxRedeliveries = 1000

func TestPubSub(t *testing.T) {
	srv := heraldtest.NewServer(t)
	ctx := context.Background()
	if err := watermill.EnsureSchema(ctx, srv.Client()); err != nil {
		t.Fatal(err)
	}
	construct := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		c, err := client.Dial(ctx, srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		pub, err := watermill.NewPublisher(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		sub, err := watermill.NewSubscriber(ctx, c, watermill.Config{
			ConsumerGroup:   group,
			MaxRedeliveries: suiteMaxRedeliveries,
		})
		if err != nil {
			t.Fatal(err)
		}
		return pub, sub
	}
	tests.TestPubSub(t, features,
		func(t *testing.T) (message.Publisher, message.Subscriber) { return construct(t, "") },
		construct)
}
