package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/lang/parser"
	"github.com/herald-mq/herald/lang/printer"
)

type consumeFlags struct {
	tls      tlsFlags
	addr     string
	json     bool
	params   string
	group    string
	settle   string
	count    int
	prefetch int
}

func newConsumeCmd(stdout, stderr io.Writer) *cobra.Command {
	var f consumeFlags
	cmd := &cobra.Command{
		Use:   "consume 'WATCH … [mode: consume] RETURN …'",
		Short: "Lease the messages of a consume-mode WATCH, print each one and settle it",
		Long: `Join a consume-mode WATCH as one consumer: each message leased to it is printed on
one line and then settled, by default with ACK. With --settle nack it is given back
for redelivery (an attempt counts), with --settle reject it is dead-lettered.

The statement may leave out [mode: consume]: it is added. --group sets (or
replaces) the statement's group, so several "herald consume" commands with the same
group share its messages. A message is printed only once its settlement is
confirmed; a settlement refused by the server (the lease lapsed, E8004) ends the
command with exit status 1.

Each line shows the attempt, the delivery's store position (seq) and the match as
JSON, then the settlement. With --json each message is one JSON object:
{"delivery_id", "attempt", "releases", "seq", "tick", "match", "settled"}.

Without --count the command runs until interrupted; messages leased but not yet
settled when it stops are released at once, without counting an attempt.`,
		Example: `  herald consume 'WATCH j: Job WHERE j.kind = "email" RETURN j'
  herald consume --group mailers --count 10 'WATCH j: Job RETURN j.id, j.to'
  herald consume --settle nack --count 1 'WATCH j: Job [mode: consume] RETURN j'
  herald consume --json --params '{"k": "email"}' 'WATCH j: Job WHERE j.kind = $k RETURN j'`,
		Args: oneStatement("consume"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConsume(cmd.Context(), f, args[0], stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", defaultAddr(), "broker URL (default from $HERALD_ADDR when set)")
	addTLSFlags(fl, &f.tls)
	fl.BoolVar(&f.json, "json", false, "print one JSON object per message")
	fl.StringVar(&f.params, "params", "", "the statement's $parameters as a JSON object")
	fl.StringVar(&f.group, "group", "", "consume as a member of this group (sets the statement's group option)")
	fl.StringVar(&f.settle, "settle", "ack", "how to settle each message: ack, nack or reject")
	fl.IntVar(&f.count, "count", 0, "stop after settling this many messages; 0 runs until interrupted")
	fl.IntVar(&f.prefetch, "prefetch", 1, "how many messages may be leased to the command at once")
	return cmd
}

func runConsume(ctx context.Context, f consumeFlags, statement string, stdout, stderr io.Writer) error {
	settle, ok := map[string]func(*client.Message, context.Context) error{
		"ack":    (*client.Message).Ack,
		"nack":   (*client.Message).Nack,
		"reject": (*client.Message).Reject,
	}[f.settle]
	if !ok {
		return usageError(fmt.Errorf("--settle %q: want ack, nack or reject", f.settle))
	}
	if f.count < 0 || f.prefetch < 1 {
		return usageError(fmt.Errorf("--count wants 0 or more and --prefetch 1 or more (got %d and %d)", f.count, f.prefetch))
	}
	params, err := parseParams(f.params)
	if err != nil {
		return err
	}
	stmt, err := consumeStatement(statement, f.group)
	if err != nil {
		return usageError(err)
	}
	c, err := dial(ctx, f.addr, f.tls, 0)
	if err != nil {
		return err
	}
	defer c.Close()

	var (
		mu       sync.Mutex
		settled  int
		failed   error
		finished = make(chan struct{})
		once     sync.Once
	)
	finish := func() { once.Do(func() { close(finished) }) }
	handler := func(hctx context.Context, m *client.Message) error {
		mu.Lock()
		done := failed != nil || (f.count > 0 && settled >= f.count)
		mu.Unlock()
		if done {
			return nil // left unsettled: released when the subscription closes
		}
		err := settle(m, context.WithoutCancel(hctx))
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed = fmt.Errorf("settling delivery %s: %w", m.DeliveryID, err)
			finish()
			return nil
		}
		settled++
		line := formatDelivery(m, f.settle)
		if f.json {
			line = deliveryJSON(m, f.settle)
		}
		if _, err := io.WriteString(stdout, line+"\n"); err != nil {
			failed = err
			finish()
		}
		if f.count > 0 && settled >= f.count {
			finish()
		}
		return nil
	}
	opts := []client.SubscribeOption{client.WithPolicy(client.Manual), client.WithPrefetch(f.prefetch),
		client.OnWarning(func(w *herald.Error) { fmt.Fprintf(stderr, "warning: %s %s\n", w.Code, w.Message) })}
	if params != nil {
		opts = append(opts, client.WithParams(params))
	}
	sub, err := c.Subscribe(ctx, stmt, handler, opts...)
	if err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	select {
	case <-finished:
	case <-sub.Done():
	case <-ctx.Done():
	}
	closeErr := sub.Close(context.WithoutCancel(ctx))
	mu.Lock()
	defer mu.Unlock()
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "stopped after %s\n", plural(settled, "message"))
	}
	switch {
	case failed != nil:
		return &ExitError{Code: 1, Err: failed}
	case sub.Err() != nil && ctx.Err() == nil:
		return &ExitError{Code: 1, Err: sub.Err()}
	case closeErr != nil && ctx.Err() == nil && !errors.Is(closeErr, client.ErrSubscriptionClosed):
		return &ExitError{Code: 1, Err: closeErr}
	}
	return nil
}

// formatDelivery renders a settled message as one line for people:
//
//	attempt=2 seq=14 {"id":"j1","n":3} ack
func formatDelivery(m *client.Message, how string) string {
	var b strings.Builder
	b.WriteString("attempt=" + strconv.Itoa(m.Attempt))
	if m.Releases > 0 {
		b.WriteString(" releases=" + strconv.Itoa(m.Releases))
	}
	b.WriteString(" seq=" + strconv.FormatUint(m.Seq, 10))
	b.WriteString(" " + compactJSON(jsonMap(m.Match)))
	b.WriteString(" " + how)
	return b.String()
}

// deliveryJSON renders a settled message as one line of JSON.
func deliveryJSON(m *client.Message, how string) string {
	return compactJSON(struct {
		DeliveryID string         `json:"delivery_id"`
		Attempt    int            `json:"attempt"`
		Releases   int            `json:"releases"`
		Seq        uint64         `json:"seq"`
		Tick       uint64         `json:"tick"`
		Match      map[string]any `json:"match"`
		Settled    string         `json:"settled"`
	}{m.DeliveryID, m.Attempt, m.Releases, m.Seq, m.Tick, jsonMap(m.Match), how})
}

// parseParams reads a --params flag: a JSON object, numbers kept exact.
func parseParams(s string) (map[string]any, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var params map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&params); err != nil {
		return nil, usageError(fmt.Errorf("--params: want a JSON object: %v", err))
	}
	return params, nil
}

// consumeStatement is the statement herald consume opens: src in consume mode, in
// group when one is given (lang/parser.ConsumeWatch), in canonical form.
func consumeStatement(src, group string) (string, error) {
	w, err := parser.ConsumeWatch(src, group)
	if err != nil {
		return "", err
	}
	return printer.String(w), nil
}
