package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
)

type queueFlags struct {
	addr    string
	tls     tlsFlags
	json    bool
	timeout time.Duration
}

// newQueueCmd is "herald queue": the queue REST API (push, pop, acknowledge) and
// inspection of queues through the query API (stats, dead letters).
func newQueueCmd(stdout io.Writer) *cobra.Command {
	f := &queueFlags{}
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Push, pop and acknowledge queue items; inspect queues and their dead letters",
		Long: `Work with the queues of a running broker (see docs/queues.md).

push, pop, ack and nack call the queue REST API; stats and dlq read the queues' nodes
with a query. All of them go through the Go client (client.Queue).

Output is a table or a short line for people; --json prints JSON for machines.
Exit status: 0 on success, 1 when the server refuses or fails (its status or error
code and message are printed on standard error), 2 for a usage error.`,
		Example: `  herald queue push emails '{"to": "ann@example.com"}' --priority 1
  herald queue pop emails --ack --ttl 60
  herald queue ack emails UMOy7SkA2lBDgpFHCrC_yw
  herald queue stats
  herald queue dlq emails --json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError(fmt.Errorf("unknown queue command %q; see herald queue --help", args[0]))
			}
			return cmd.Help()
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.addr, "addr", defaultAddr(), "broker URL (default from $HERALD_ADDR when set)")
	addTLSFlags(pf, &f.tls)
	pf.BoolVar(&f.json, "json", false, "print JSON instead of tables")
	pf.DurationVar(&f.timeout, "timeout", time.Minute, "time limit of one request")
	cmd.AddCommand(
		newQueuePushCmd(f, stdout),
		newQueuePopCmd(f, stdout),
		newQueueAckCmd(f, stdout),
		newQueueNackCmd(f, stdout),
		newQueueStatsCmd(f, stdout),
		newQueueDLQCmd(f, stdout),
	)
	return cmd
}

// exactArgs checks the argument count of a subcommand and the queue id in args[0].
func exactArgs(min, max int, usage string) cobra.PositionalArgs {
	count := argCount(min, max, "queue "+usage)
	return func(cmd *cobra.Command, args []string) error {
		if err := count(cmd, args); err != nil {
			return err
		}
		if len(args) > 0 && !client.ValidQueueID(args[0]) {
			return usageError(fmt.Errorf("queue id %q is invalid: use 1 to %d characters from letters, digits and - _ . ~ :", args[0], client.MaxQueueIDLength))
		}
		return nil
	}
}

// open dials the broker and returns the queue named id.
func (f *queueFlags) open(ctx context.Context, id string) (*client.Client, *client.Queue, error) {
	c, err := dial(ctx, f.addr, f.tls, f.timeout)
	if err != nil {
		return nil, nil, err
	}
	return c, c.Queue(id), nil
}

func newQueuePushCmd(f *queueFlags, stdout io.Writer) *cobra.Command {
	var priority int64
	cmd := &cobra.Command{
		Use:   "push QUEUE ITEM_JSON",
		Short: "Add an item to a queue",
		Long: `Add an item to a queue (POST /queue/{id}/push). ITEM_JSON is any JSON value except
null; a bare word is not JSON, so quote strings: '"hello"'. Priority 0 is the highest
and the default. Prints the new item's node id.`,
		Example: `  herald queue push emails '{"task_id": 123, "action": "send_email"}'
  herald queue push emails '"urgent"' --priority 0
  herald queue push reports '[1, 2, 3]' --priority 5 --json`,
		Args: exactArgs(2, 2, "push QUEUE ITEM_JSON [--priority N]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			item := strings.TrimSpace(args[1])
			if !json.Valid([]byte(item)) || item == "null" {
				return usageError(fmt.Errorf("ITEM_JSON %q is not a JSON value other than null (quote strings: '\"text\"')", args[1]))
			}
			if priority < 0 {
				return usageError(fmt.Errorf("--priority %d: want 0 (the highest) or more", priority))
			}
			c, q, err := f.open(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			ans, err := q.Push(cmd.Context(), json.RawMessage(item), priority)
			if err != nil {
				return f.fail(cmd, err, time.Time{})
			}
			if f.json {
				return writeLine(stdout, compactJSON(struct {
					Success bool `json:"success"`
					client.Pushed
				}{true, ans}))
			}
			return writeLine(stdout, fmt.Sprintf("pushed %s to %s (priority %d)", ans.ID, args[0], ans.Priority))
		},
	}
	cmd.Flags().Int64Var(&priority, "priority", 0, "the item's priority; 0 is the highest")
	return cmd
}

func newQueuePopCmd(f *queueFlags, stdout io.Writer) *cobra.Command {
	var (
		ack   bool
		ttl   int
		count int
	)
	cmd := &cobra.Command{
		Use:   "pop QUEUE",
		Short: "Take items from a queue, highest priority first",
		Long: `Take up to --count items from a queue (POST /queue/{id}/pop), priority 0 first and in
push order within a priority.

Without --ack the items are removed from the queue at once. With --ack they are held
under the queue's lock for --ttl seconds (1–300, default 30): the command prints the
lock id and its expiry; settle it with "herald queue ack" (the items are removed) or
"herald queue nack" (they go back). An unsettled lock expires and its items return
to their place. While a lock is active every pop of the queue is refused (exit 1).`,
		Example: `  herald queue pop emails
  herald queue pop emails --count 10
  herald queue pop emails --ack --ttl 60
  herald queue pop emails --ack --json | jq -r .lock_id`,
		Args: exactArgs(1, 1, "pop QUEUE [--ack [--ttl SECONDS]] [--count N]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("ttl") && !ack {
				return usageError(errors.New("--ttl needs --ack: only an acknowledged pop holds a lock"))
			}
			if maxTTL := int(client.MaxLockTTL / time.Second); ttl < 1 || ttl > maxTTL {
				return usageError(fmt.Errorf("--ttl %d: want 1 to %d seconds", ttl, maxTTL))
			}
			if count < 1 || count > client.MaxPopCount {
				return usageError(fmt.Errorf("--count %d: want 1 to %d", count, client.MaxPopCount))
			}
			c, q, err := f.open(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			o := client.PopOptions{Count: count, Lock: ack}
			if ack {
				o.TTL = time.Duration(ttl) * time.Second
			}
			ans, err := q.Pop(cmd.Context(), o)
			if err != nil {
				return f.fail(cmd, err, ans.LockExpiresAt)
			}
			if f.json {
				return writeLine(stdout, popJSON(ack, ans))
			}
			return writeString(stdout, formatPop(args[0], ack, ans))
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&ack, "ack", false, "hold the items under a lock until acknowledged")
	fl.IntVar(&ttl, "ttl", 30, "the lock's lifetime in seconds, 1–300 (with --ack)")
	fl.IntVar(&count, "count", 1, "how many items to take at most, 1–100")
	return cmd
}

// popJSON renders a pop as the REST API answers it: the items and their count and, for
// a pop with --ack, whether it took the lock, with the lock's id and expiry.
func popJSON(ack bool, p client.Popped) string {
	ans := struct {
		Items         []json.RawMessage `json:"items"`
		Count         int               `json:"count"`
		Locked        *bool             `json:"locked,omitempty"`
		LockID        string            `json:"lock_id,omitempty"`
		LockExpiresAt *float64          `json:"lock_expires_at,omitempty"`
	}{Items: p.Items, Count: len(p.Items)}
	if ans.Items == nil {
		ans.Items = []json.RawMessage{}
	}
	if ack {
		ans.Locked = &p.Locked
	}
	if p.Locked {
		secs := unixSeconds(p.LockExpiresAt)
		ans.LockID, ans.LockExpiresAt = p.LockID, &secs
	}
	return compactJSON(ans)
}

// formatPop renders a pop: the items as a one-column table of compact JSON, then the
// lock when one was taken.
func formatPop(queue string, ack bool, ans client.Popped) string {
	rows := make([][]json.RawMessage, len(ans.Items))
	for i, it := range ans.Items {
		rows[i] = []json.RawMessage{jsonString(compactRaw(it))}
	}
	var b strings.Builder
	b.WriteString(formatTable([]string{"item"}, rows))
	b.WriteString("(" + plural(len(ans.Items), "item") + ")\n")
	switch {
	case ans.Locked:
		fmt.Fprintf(&b, "lock id:    %s\nexpires at: %s\n", ans.LockID, formatTime(ans.LockExpiresAt))
		fmt.Fprintf(&b, "settle with: herald queue ack %s %s (or nack to give the items back)\n", queue, ans.LockID)
	case ack:
		b.WriteString("no lock taken: the queue is empty\n")
	}
	return b.String()
}

func newQueueAckCmd(f *queueFlags, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "ack QUEUE LOCK_ID",
		Short: "Acknowledge a locked pop: its items are removed",
		Long: `Acknowledge the lock of a pop made with --ack (POST /queue/{id}/acknowledge): the
items it holds are removed from the queue and the lock is released.

A lock id that does not match the active lock (the lock stays), a queue without a
lock, and a lock that has expired (its items are back in the queue) are refused with
exit status 1 and the server's status and message.`,
		Example: `  herald queue ack emails UMOy7SkA2lBDgpFHCrC_yw
  herald queue ack emails "$(herald queue pop emails --ack --json | jq -r .lock_id)"`,
		Args: exactArgs(2, 2, "ack QUEUE LOCK_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, q, err := f.open(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			ans, err := q.Acknowledge(cmd.Context(), args[1])
			if err != nil {
				return f.fail(cmd, err, time.Time{})
			}
			if f.json {
				return writeLine(stdout, compactJSON(struct {
					Success bool `json:"success"`
					client.Acknowledged
				}{true, ans}))
			}
			line := fmt.Sprintf("acknowledged %s of %s; removed from the queue", plural(ans.Acknowledged, "item"), args[0])
			if ans.Returned > 0 {
				line += fmt.Sprintf("; %s returned to the queue (their lease ended first)", plural(ans.Returned, "item"))
			}
			return writeLine(stdout, line)
		},
	}
}

func newQueueNackCmd(f *queueFlags, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "nack QUEUE LOCK_ID",
		Short: "Give a locked pop's items back to the queue at once",
		Long: `Release the lock of a pop made with --ack without removing its items: they go back
to the queue at their original place, and the queue can be popped again at once
(POST /queue/{id}/release). A LOCK_ID that does not match the active lock, a queue
without a lock, and a lock that has expired (its items are back already) are refused
as "herald queue ack" refuses them.`,
		Example: `  herald queue nack emails UMOy7SkA2lBDgpFHCrC_yw
  herald queue nack emails UMOy7SkA2lBDgpFHCrC_yw --json`,
		Args: exactArgs(2, 2, "nack QUEUE LOCK_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runQueueNack(cmd, f, args[0], args[1], stdout)
		},
	}
}

func runQueueNack(cmd *cobra.Command, f *queueFlags, queue, lockID string, stdout io.Writer) error {
	c, q, err := f.open(cmd.Context(), queue)
	if err != nil {
		return err
	}
	defer c.Close()
	released, err := q.Release(cmd.Context(), lockID)
	expired := errors.Is(err, herald.CodeLockExpired)
	if err != nil && !expired {
		return f.fail(cmd, err, time.Time{})
	}
	if f.json {
		return writeLine(stdout, compactJSON(map[string]any{"success": true, "queue": queue, "items_released": released, "lock_was_active": !expired}))
	}
	if expired {
		return writeLine(stdout, fmt.Sprintf("the lock of %s had already expired; removed it (its items were back in the queue)", queue))
	}
	return writeLine(stdout, fmt.Sprintf("released %s of %s; back in the queue at their place, and the lock is removed", plural(released, "item"), queue))
}

// fail reports a refused or failed call with exit status 1. A refusal of the queue
// contract (a wrong lock id, no lock, an expired lock, a locked queue, a queue that
// holds nothing) shows its HTTP status, and lockExpires when the queue is locked; any
// other Herald error its code. With --json the refusal is also printed on stdout, in
// the REST API's shape or as the JSON API's error body.
func (f *queueFlags) fail(cmd *cobra.Command, err error, lockExpires time.Time) error {
	var he *herald.Error
	if !errors.As(err, &he) {
		return &ExitError{Code: 1, Err: err}
	}
	refusal := contractRefusal(he.Code)
	if f.json {
		switch {
		case he.Code == herald.CodeQueueLocked:
			_ = writeLine(cmd.OutOrStdout(), compactJSON(struct {
				Message       string  `json:"message"`
				LockExpiresAt float64 `json:"lock_expires_at"`
			}{he.Message, unixSeconds(lockExpires)}))
		case refusal:
			_ = writeLine(cmd.OutOrStdout(), compactJSON(struct {
				Success   bool   `json:"success"`
				Message   string `json:"message"`
				ErrorCode string `json:"error_code,omitempty"`
			}{false, he.Message, contractCode(he.Code)}))
		default:
			_ = writeLine(cmd.OutOrStdout(), errorJSON(he))
		}
	}
	text := errorText(he)
	if refusal {
		status := he.Code.Info().HTTP
		text = fmt.Sprintf("%d %s", status, http.StatusText(status))
		if code := contractCode(he.Code); code != "" {
			text += " " + code
		}
		text += ": " + he.Message
		if he.Code == herald.CodeQueueLocked && !lockExpires.IsZero() {
			text += " (lock expires at " + formatTime(lockExpires) + ")"
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "herald: %s\n", text)
	return &ExitError{Code: 1, Err: err, Silent: true}
}

// contractRefusal reports whether code is one the queue REST API refuses with a body
// of its own rather than the error table's.
func contractRefusal(code herald.Code) bool {
	switch code {
	case herald.CodeMalformedRequest, herald.CodeNotFound, herald.CodeQueueLocked, herald.CodeLockExpired:
		return true
	}
	return false
}

// contractCode is the error_code the queue REST API gives a refusal with code: the code
// itself, the name LOCK_EXPIRED for an expired lock, none for a locked queue.
func contractCode(code herald.Code) string {
	switch code {
	case herald.CodeQueueLocked:
		return ""
	case herald.CodeLockExpired:
		return code.Name()
	}
	return string(code)
}
