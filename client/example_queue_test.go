package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// A queue of the REST API: push with priorities, pop under the queue's lock, and
// acknowledge. While the lock is active, other pops are refused with a code.
func ExampleQueue() {
	ctx := context.Background()
	srv, err := heraldtest.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c, err := client.Dial(ctx, srv.URL(), client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	emails := c.Queue("emails")
	for i, item := range []string{`{"to": "ann"}`, `{"to": "bo"}`} {
		if _, err := emails.Push(ctx, json.RawMessage(item), int64(1-i)); err != nil {
			log.Fatal(err)
		}
	}
	popped, err := emails.Pop(ctx, client.PopOptions{Count: 10, Lock: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("popped %s and %s, locked: %v\n", popped.Items[0], popped.Items[1], popped.Locked)

	_, err = emails.Pop(ctx, client.PopOptions{})
	fmt.Println("another pop is refused:", errors.Is(err, herald.CodeQueueLocked))

	ack, err := emails.Acknowledge(ctx, popped.LockID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acknowledged:", ack.Acknowledged)
	_, err = emails.Stats(ctx)
	fmt.Println("then the queue is gone:", errors.Is(err, herald.CodeNotFound))
	// Output:
	// popped {"to":"bo"} and {"to":"ann"}, locked: true
	// another pop is refused: true
	// acknowledged: 2
	// then the queue is gone: true
}

// Every error the client returns that the server raised, or that the client raises
// for a call it cannot make, is a *herald.Error, and errors.Is matches its code.
func Example_errorCodes() {
	ctx := context.Background()
	srv, err := heraldtest.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c, err := client.Dial(ctx, srv.URL(), client.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Exec(ctx, `MATCH j: Job RETURN ]`, nil)
	var he *herald.Error
	if errors.As(err, &he) {
		fmt.Println(he.Code, he.Code.Name(), "at", he.Line, he.Column, errors.Is(err, herald.CodeSyntax))
	}
	_, err = c.Subscribe(ctx, `WATCH j: Job [mode: consume] RETURN j`, nil)
	fmt.Println(herald.CodeOf(err), errors.Is(err, herald.CodeInvalidArgument))
	c.Close()
	_, err = c.Exec(ctx, `MATCH j: Job RETURN j`, nil)
	fmt.Println(herald.CodeOf(err), errors.Is(err, client.ErrClosed))
	// Output:
	// E1001 SYNTAX_ERROR at 1 21 true
	// E4019 true
	// E4018 true
}
