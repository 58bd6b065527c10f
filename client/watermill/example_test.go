package watermill_test

// The code before Example is README.md's, verbatim (TestReadmeSnippet checks it).

import (
	"context"
	"fmt"

	wm "github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/client/watermill"
)

// publishAndReceive publishes a message on the topic "orders" of the Herald server at
// url (such as "http://localhost:7420") and receives it in the consumer group "billing".
func publishAndReceive(ctx context.Context, url string) error {
	c, err := client.Dial(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close()

	pub, err := watermill.NewPublisher(ctx, c) // declares the schema if needed
	if err != nil {
		return err
	}
	defer pub.Close()
	sub, err := watermill.NewSubscriber(ctx, c, watermill.Config{ConsumerGroup: "billing"})
	if err != nil {
		return err
	}
	defer sub.Close()

	// Subscribe first: a group receives the messages published after it subscribed.
	msgs, err := sub.Subscribe(ctx, "orders")
	if err != nil {
		return err
	}
	if err := pub.Publish("orders", message.NewMessage(wm.NewUUID(), []byte("hello"))); err != nil {
		return err
	}
	m := <-msgs
	fmt.Println(string(m.Payload))
	m.Ack() // Herald ACK: the node is deleted
	return nil
}

func Example() {
	url, stop := startServer()
	defer stop()
	if err := publishAndReceive(context.Background(), url); err != nil {
		fmt.Println(err)
	}
	// Output: hello
}
