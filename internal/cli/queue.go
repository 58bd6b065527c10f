package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
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

push, pop and ack call the queue REST API. nack, stats and dlq read and settle the
queues' nodes through the query API (POST /v1/query).

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
	defAddr := os.Getenv("HERALD_ADDR")
	if defAddr == "" {
		defAddr = "http://127.0.0.1:7420"
	}
	pf.StringVar(&f.addr, "addr", defAddr, "broker URL (default from $HERALD_ADDR when set)")
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
		if len(args) > 0 && !broker.ValidQueueName(args[0]) {
			return usageError(fmt.Errorf("queue id %q is invalid: use 1 to %d characters from letters, digits and - _ . ~ :", args[0], broker.MaxQueueName))
		}
		return nil
	}
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
			c, err := newQueueClient(f)
			if err != nil {
				return err
			}
			var ans struct {
				ID       string `json:"id"`
				Priority int64  `json:"priority"`
			}
			body := map[string]any{"item": json.RawMessage(item), "priority": priority}
			data, err := c.rest(cmd.Context(), "/queue/"+url.PathEscape(args[0])+"/push", nil, body, &ans)
			if err != nil {
				return c.fail(stdout, err)
			}
			if f.json {
				return writeLine(stdout, string(data))
			}
			return writeLine(stdout, fmt.Sprintf("pushed %s to %s (priority %d)", ans.ID, args[0], ans.Priority))
		},
	}
	cmd.Flags().Int64Var(&priority, "priority", 0, "the item's priority; 0 is the highest")
	return cmd
}

// popAnswer is the 200 answer of a pop.
type popResult struct {
	Items         []json.RawMessage `json:"items"`
	Count         int               `json:"count"`
	Locked        bool              `json:"locked"`
	LockID        string            `json:"lock_id"`
	LockExpiresAt float64           `json:"lock_expires_at"`
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
			if ttl < 1 || ttl > 300 {
				return usageError(fmt.Errorf("--ttl %d: want 1 to 300 seconds", ttl))
			}
			if count < 1 || count > 100 {
				return usageError(fmt.Errorf("--count %d: want 1 to 100", count))
			}
			q := url.Values{"count": {strconv.Itoa(count)}}
			if ack {
				q.Set("require_ack", "true")
				q.Set("ttl_seconds", strconv.Itoa(ttl))
			}
			c, err := newQueueClient(f)
			if err != nil {
				return err
			}
			var ans popResult
			data, err := c.rest(cmd.Context(), "/queue/"+url.PathEscape(args[0])+"/pop", q, nil, &ans)
			if err != nil {
				return c.fail(stdout, err)
			}
			if f.json {
				return writeLine(stdout, string(data))
			}
			return writeString(stdout, formatPop(args[0], ack, &ans))
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&ack, "ack", false, "hold the items under a lock until acknowledged")
	fl.IntVar(&ttl, "ttl", 30, "the lock's lifetime in seconds, 1–300 (with --ack)")
	fl.IntVar(&count, "count", 1, "how many items to take at most, 1–100")
	return cmd
}

// formatPop renders a pop: the items as a one-column table of compact JSON, then the
// lock when one was taken.
func formatPop(queue string, ack bool, ans *popResult) string {
	rows := make([][]json.RawMessage, len(ans.Items))
	for i, it := range ans.Items {
		rows[i] = []json.RawMessage{jsonString(compactRaw(it))}
	}
	var b strings.Builder
	b.WriteString(formatTable([]string{"item"}, rows))
	b.WriteString("(" + plural(len(ans.Items), "item") + ")\n")
	switch {
	case ans.Locked:
		fmt.Fprintf(&b, "lock id:    %s\nexpires at: %s\n", ans.LockID, formatUnix(ans.LockExpiresAt))
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
			c, err := newQueueClient(f)
			if err != nil {
				return err
			}
			var ans struct {
				Acknowledged int `json:"items_acknowledged"`
				Returned     int `json:"items_returned"`
			}
			data, err := c.rest(cmd.Context(), "/queue/"+url.PathEscape(args[0])+"/acknowledge", nil, map[string]string{"lock_id": args[1]}, &ans)
			if err != nil {
				return c.fail(stdout, err)
			}
			if f.json {
				return writeLine(stdout, string(data))
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
			return runQueueNack(cmd.Context(), f, args[0], args[1], stdout)
		},
	}
}

func runQueueNack(ctx context.Context, f *queueFlags, queue, lockID string, stdout io.Writer) error {
	c, err := newQueueClient(f)
	if err != nil {
		return err
	}
	var ans struct {
		Released int `json:"items_released"`
	}
	_, err = c.rest(ctx, "/queue/"+url.PathEscape(queue)+"/release", nil, map[string]string{"lock_id": lockID}, &ans)
	var qr *queueRefusal
	expired := errors.As(err, &qr) && qr.Status == http.StatusGone
	if err != nil && !expired {
		return c.fail(stdout, err)
	}
	if f.json {
		return writeLine(stdout, compactJSON(map[string]any{"success": true, "queue": queue, "items_released": ans.Released, "lock_was_active": !expired}))
	}
	if expired {
		return writeLine(stdout, fmt.Sprintf("the lock of %s had already expired; removed it (its items were back in the queue)", queue))
	}
	return writeLine(stdout, fmt.Sprintf("released %s of %s; back in the queue at their place, and the lock is removed", plural(ans.Released, "item"), queue))
}

// queueStats is one queue's row of "herald queue stats".
type queueStats struct {
	Queue string `json:"queue"`
	// Items counts every QueueItem node of the queue, held by a lock or not.
	Items int `json:"items"`
	// Ready is Items minus Locked.
	Ready int `json:"ready"`
	// Locked counts the delivery ids of the queue's active _QueueLock.
	Locked        int              `json:"locked"`
	LockExpiresAt *time.Time       `json:"lock_expires_at,omitempty"`
	Priorities    map[string]int64 `json:"priorities"`
}

func newQueueStatsCmd(f *queueFlags, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "stats [QUEUE]",
		Short: "Count the items of each queue: all, ready, and held by a lock",
		Long: `Count the items of every queue, or of one, through the query API:

  items       QueueItem nodes of the queue (MATCH i: QueueItem), locked or not
  ready       items minus locked
  locked      items held by the queue's active lock (the leases of its
              _QueueLock node while expires_at is in the future)
  lock        when the active lock expires
  priorities  items per priority, as priority:count

"ready" is an upper bound on what a pop can take: an item leased by some other
consume-mode WATCH on QueueItem is counted as ready. A queue exists while it holds
items or a lock: naming one that holds neither exits with status 1 (E4007).`,
		Example: `  herald queue stats
  herald queue stats emails
  herald queue stats --json | jq '.queues[] | select(.locked > 0)'`,
		Args: exactArgs(0, 1, "stats [QUEUE]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newQueueClient(f)
			if err != nil {
				return err
			}
			where, lockWhere, params := "", "", map[string]any{}
			if len(args) == 1 {
				where, lockWhere, params["queue"] = " WHERE i.queue = $queue", " AND l.queue = $queue", args[0]
			}
			resp, err := c.query(cmd.Context(),
				"MATCH i: QueueItem"+where+" RETURN i.queue, i.priority, COUNT(i);\n"+
					"MATCH l: _QueueLock WHERE l.expires_at > now()"+lockWhere+" RETURN l.queue, l.delivery_handles, l.expires_at", params)
			if err != nil {
				return c.fail(stdout, err)
			}
			all, err := collectStats(resp)
			if err != nil {
				return &ExitError{Code: 1, Err: err}
			}
			if len(args) == 1 && len(all) == 0 {
				// A queue exists while it holds items or a lock: there is nothing to count.
				return c.fail(stdout, &queueRefusal{Status: http.StatusNotFound, ErrorCode: string(herald.CodeNotFound),
					Message: fmt.Sprintf("no queue %q: it holds no items and no lock", args[0])})
			}
			if f.json {
				if all == nil {
					all = []*queueStats{}
				}
				return writeLine(stdout, compactJSON(map[string]any{"queues": all}))
			}
			return writeString(stdout, formatStatsTable(all))
		},
	}
}

func collectStats(resp *queryResponse) ([]*queueStats, error) {
	if len(resp.Results) != 2 {
		return nil, fmt.Errorf("unexpected answer: %d results", len(resp.Results))
	}
	byQueue := map[string]*queueStats{}
	get := func(q string) *queueStats {
		s := byQueue[q]
		if s == nil {
			s = &queueStats{Queue: q, Priorities: map[string]int64{}}
			byQueue[q] = s
		}
		return s
	}
	for _, row := range resp.Results[0].Rows {
		var (
			q string
			n int
		)
		if len(row) != 3 || json.Unmarshal(row[0], &q) != nil || json.Unmarshal(row[2], &n) != nil {
			continue // an item written by hand without a string queue
		}
		s := get(q)
		s.Items += n
		key, _, _ := cell(row[1])
		s.Priorities[key] += int64(n)
	}
	for _, row := range resp.Results[1].Rows {
		var (
			q   string
			ids []string
			exp time.Time
		)
		if len(row) != 3 || json.Unmarshal(row[0], &q) != nil || json.Unmarshal(row[1], &ids) != nil || json.Unmarshal(row[2], &exp) != nil {
			return nil, fmt.Errorf("unexpected _QueueLock row: %s", compactJSON(row))
		}
		s := get(q)
		s.Locked = len(ids)
		s.LockExpiresAt = &exp
	}
	out := make([]*queueStats, 0, len(byQueue))
	for _, s := range byQueue {
		s.Ready = max(s.Items-s.Locked, 0)
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out, nil
}

func formatStatsTable(all []*queueStats) string {
	rows := make([][]json.RawMessage, len(all))
	for i, s := range all {
		lock := "-"
		if s.LockExpiresAt != nil {
			lock = s.LockExpiresAt.UTC().Format(timeLayout)
		}
		var prio []string
		for _, k := range sortedKeys(s.Priorities) {
			prio = append(prio, fmt.Sprintf("%s:%d", k, s.Priorities[k]))
		}
		rows[i] = []json.RawMessage{jsonString(s.Queue), jsonNumber(s.Items), jsonNumber(s.Ready), jsonNumber(s.Locked), jsonString(lock), jsonString(strings.Join(prio, " "))}
	}
	return formatTable([]string{"queue", "items", "ready", "locked", "lock expires", "priorities"}, rows) +
		"(" + plural(len(all), "queue") + ")\n"
}

// sortedKeys orders priority keys numerically, anything not a whole number last.
func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	num := func(k string) (int64, bool) { n, err := strconv.ParseInt(k, 10, 64); return n, err == nil }
	sort.Slice(keys, func(i, j int) bool {
		a, aok := num(keys[i])
		b, bok := num(keys[j])
		if aok != bok {
			return aok
		}
		if aok && a != b {
			return a < b
		}
		return keys[i] < keys[j]
	})
	return keys
}

// deadLetter is one dead letter of a queue's items.
type deadLetter struct {
	ID        string          `json:"id"`
	Item      json.RawMessage `json:"item"`
	Priority  json.RawMessage `json:"priority,omitempty"`
	Reason    string          `json:"failure_reason"`
	Attempts  int64           `json:"delivery_attempts"`
	CreatedAt string          `json:"created_at"`
	SubjectID string          `json:"subject_id"`
}

func newQueueDLQCmd(f *queueFlags, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "dlq QUEUE",
		Short: "List the dead letters of a queue's items",
		Long: `List the dead letters (_DeadLetter nodes) of a queue's items, oldest first.

The command reads every letter with subject_type "QueueItem" through the query API
and keeps those whose original_match is a QueueItem of QUEUE: the match's "queue"
field (or a "<var>.queue" column, or the queue of a QueueItem node inside the match)
must equal QUEUE exactly. A letter whose match carries no queue — a consume watch
that returned only other fields — cannot be placed and is not listed.

Queue pops never dead-letter (their items are redelivered however often their locks
expire); letters appear when items are consumed by other consume-mode watches with
max_redeliveries, or NACKed with [no_retry]. Redrive a letter with REDRIVE "<id>".`,
		Example: `  herald queue dlq emails
  herald queue dlq emails --json | jq '.dead_letters[].item'`,
		Args: exactArgs(1, 1, "dlq QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newQueueClient(f)
			if err != nil {
				return err
			}
			resp, err := c.query(cmd.Context(),
				`MATCH d: _DeadLetter WHERE d.subject_type = "QueueItem" RETURN d.id, d.original_match, d.failure_reason, d.delivery_attempts, d.created_at, d.subject_id ORDER BY d.created_at`, nil)
			if err != nil {
				return c.fail(stdout, err)
			}
			letters := []deadLetter{}
			for _, row := range firstRows(resp) {
				if l, ok := letterOf(row, args[0]); ok {
					letters = append(letters, l)
				}
			}
			if f.json {
				return writeLine(stdout, compactJSON(map[string]any{"queue": args[0], "dead_letters": letters, "count": len(letters)}))
			}
			rows := make([][]json.RawMessage, len(letters))
			for i, l := range letters {
				rows[i] = []json.RawMessage{jsonString(l.ID), jsonString(compactRaw(l.Item)), jsonString(l.Reason), jsonNumber(int(l.Attempts)), jsonString(l.CreatedAt)}
			}
			return writeString(stdout, formatTable([]string{"letter", "item", "reason", "attempts", "created at"}, rows)+
				"("+plural(len(letters), "dead letter")+")\n")
		},
	}
}

// letterOf decodes a dead-letter row and reports whether it belongs to queue.
func letterOf(row []json.RawMessage, queue string) (deadLetter, bool) {
	var (
		l     deadLetter
		match string
	)
	if len(row) != 6 || json.Unmarshal(row[0], &l.ID) != nil || json.Unmarshal(row[1], &match) != nil {
		return l, false
	}
	_ = json.Unmarshal(row[2], &l.Reason)
	_ = json.Unmarshal(row[3], &l.Attempts)
	_ = json.Unmarshal(row[4], &l.CreatedAt)
	_ = json.Unmarshal(row[5], &l.SubjectID)
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(match), &m) != nil {
		return l, false
	}
	node := queueItemIn(m, queue)
	if node == nil {
		return l, false
	}
	l.Item = itemJSON(node["item"])
	l.Priority = node["priority"]
	return l, true
}

// queueItemIn finds the fields of a QueueItem of queue in a match: the match itself
// (RETURN i), its "<var>.<field>" columns, or a node value inside it.
func queueItemIn(m map[string]json.RawMessage, queue string) map[string]json.RawMessage {
	is := func(raw json.RawMessage) bool {
		var s string
		return json.Unmarshal(raw, &s) == nil && s == queue
	}
	if raw, ok := m["queue"]; ok {
		if is(raw) {
			return m
		}
		return nil
	}
	for k, raw := range m {
		if v, ok := strings.CutSuffix(k, ".queue"); ok && is(raw) {
			cols := map[string]json.RawMessage{}
			for k2, raw2 := range m {
				if f, ok := strings.CutPrefix(k2, v+"."); ok {
					cols[f] = raw2
				}
			}
			return cols
		}
	}
	for _, raw := range m {
		var inner map[string]json.RawMessage
		if json.Unmarshal(raw, &inner) == nil && is(inner["queue"]) {
			return inner
		}
	}
	return nil
}

// itemJSON turns a stored item (compact JSON text in a string) back into JSON; a text
// that is not JSON stays a JSON string, as a pop would return it.
func itemJSON(raw json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if json.Valid([]byte(s)) {
			return json.RawMessage(s)
		}
		return raw
	}
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// queueClient talks to the queue REST API and the query API.
type queueClient struct {
	*apiClient
	json bool
}

func newQueueClient(f *queueFlags) (*queueClient, error) {
	c, err := newAPIClient(f.addr, f.tls, f.timeout)
	if err != nil {
		return nil, err
	}
	return &queueClient{apiClient: c, json: f.json}, nil
}

// queueRefusal is a refusal of the queue contract: a status with a message (and, for
// 410, error_code; for 423, lock_expires_at). body is the answer as sent.
type queueRefusal struct {
	Status        int     `json:"-"`
	Success       bool    `json:"success"`
	Message       string  `json:"message"`
	ErrorCode     string  `json:"error_code,omitempty"`
	LockExpiresAt float64 `json:"lock_expires_at,omitempty"`
	body          []byte
}

func (e *queueRefusal) Error() string {
	s := fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
	if e.ErrorCode != "" {
		s += " " + e.ErrorCode
	}
	s += ": " + e.Message
	if e.LockExpiresAt > 0 {
		s += " (lock expires at " + formatUnix(e.LockExpiresAt) + ")"
	}
	return s
}

// rest posts body (when not nil) to path with query q and decodes a 200 answer into
// out. It returns the raw answer; other statuses become a *queueRefusal (the contract's
// bodies) or an *apiError (the error table).
func (c *queueClient) rest(ctx context.Context, path string, q url.Values, body, out any) ([]byte, error) {
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	status, data, err := c.do(ctx, http.MethodPost, path, body)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		var probe struct {
			Error   json.RawMessage `json:"error"`
			Message *string         `json:"message"`
		}
		if json.Unmarshal(data, &probe) == nil && probe.Error == nil && probe.Message != nil {
			r := &queueRefusal{Status: status, body: data}
			_ = json.Unmarshal(data, r)
			return nil, r
		}
		return nil, decodeError(status, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("unexpected answer from %s: %s", path, data)
	}
	return data, nil
}

// query runs statements with parameters through POST /v1/query.
func (c *queueClient) query(ctx context.Context, text string, params map[string]any) (*queryResponse, error) {
	req := map[string]any{"query": text}
	if len(params) > 0 {
		req["params"] = params
	}
	status, data, err := c.do(ctx, http.MethodPost, "/v1/query", req)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, decodeError(status, data)
	}
	var resp queryResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("unreadable query answer: %v", err)
	}
	return &resp, nil
}

// fail turns err into exit status 1. With --json, a server answer is also printed on
// stdout: a refusal as the server sent it, a query error as {"error": {...}}.
func (c *queueClient) fail(stdout io.Writer, err error) error {
	if c.json {
		var qr *queueRefusal
		var ae *apiError
		switch {
		case errors.As(err, &qr) && qr.body != nil:
			_ = writeLine(stdout, string(qr.body))
		case errors.As(err, &qr):
			b, _ := json.Marshal(qr)
			_ = writeLine(stdout, string(b))
		case errors.As(err, &ae) && ae.Status != 0:
			_ = writeLine(stdout, errorJSON(ae))
		}
	}
	return &ExitError{Code: 1, Err: err}
}

func firstRows(resp *queryResponse) [][]json.RawMessage {
	if len(resp.Results) == 0 {
		return nil
	}
	return resp.Results[0].Rows
}

const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// formatUnix renders seconds since the epoch (with a fraction) as UTC, to the millisecond.
func formatUnix(secs float64) string {
	sec, frac := math.Modf(secs)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC().Format(timeLayout)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func jsonString(s string) json.RawMessage { b, _ := json.Marshal(s); return b }

func jsonNumber(n int) json.RawMessage { return json.RawMessage(strconv.Itoa(n)) }

// compactRaw is raw JSON without insignificant blanks, as text.
func compactRaw(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func writeLine(w io.Writer, s string) error {
	_, err := io.WriteString(w, strings.TrimRight(s, "\n")+"\n")
	return err
}

func writeString(w io.Writer, s string) error {
	_, err := io.WriteString(w, s)
	return err
}
