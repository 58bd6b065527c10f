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
	ContextPreserved:                    false,
}

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
		sub, err := watermill.NewSubscriber(ctx, c, watermill.Config{ConsumerGroup: group})
		if err != nil {
			t.Fatal(err)
		}
		return pub, sub
	}
	tests.TestPubSub(t, features,
		func(t *testing.T) (message.Publisher, message.Subscriber) { return construct(t, "") },
		construct)
}
