package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herald-mq/herald/client"
)

// The inspection commands of "herald queue": stats and dlq, and the helpers that
// format the queue commands' output.

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
			c, err := dial(cmd.Context(), f.addr, f.tls, f.timeout)
			if err != nil {
				return err
			}
			defer c.Close()
			var all []client.QueueStats
			if len(args) == 1 {
				var one client.QueueStats
				one, err = c.Queue(args[0]).Stats(cmd.Context())
				all = []client.QueueStats{one}
			} else {
				all, err = c.QueueStats(cmd.Context())
			}
			if err != nil {
				return f.fail(cmd, err, time.Time{})
			}
			if f.json {
				return writeLine(stdout, compactJSON(map[string]any{"queues": all}))
			}
			return writeString(stdout, formatStatsTable(all))
		},
	}
}

func formatStatsTable(all []client.QueueStats) string {
	rows := make([][]json.RawMessage, len(all))
	for i, s := range all {
		lock := "-"
		if s.LockExpiresAt != nil {
			lock = formatTime(*s.LockExpiresAt)
		}
		var prio []string
		for _, k := range slices.Sorted(maps.Keys(s.Priorities)) {
			prio = append(prio, fmt.Sprintf("%d:%d", k, s.Priorities[k]))
		}
		rows[i] = []json.RawMessage{jsonString(s.Queue), jsonNumber(s.Items), jsonNumber(s.Ready), jsonNumber(s.Locked), jsonString(lock), jsonString(strings.Join(prio, " "))}
	}
	return formatTable([]string{"queue", "items", "ready", "locked", "lock expires", "priorities"}, rows) +
		"(" + plural(len(all), "queue") + ")\n"
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
max_redeliveries, or NACKed with [no_retry]. Redrive a letter with REDRIVE "<id>",
or redrive and purge them by filter with herald dlq --queue QUEUE.`,
		Example: `  herald queue dlq emails
  herald queue dlq emails --json | jq '.dead_letters[].item'`,
		Args: exactArgs(1, 1, "dlq QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dial(cmd.Context(), f.addr, f.tls, f.timeout)
			if err != nil {
				return err
			}
			defer c.Close()
			letters, err := c.Queue(args[0]).DeadLetters(cmd.Context())
			if err != nil {
				return f.fail(cmd, err, time.Time{})
			}
			if f.json {
				return writeLine(stdout, compactJSON(map[string]any{"queue": args[0], "dead_letters": letters, "count": len(letters)}))
			}
			rows := make([][]json.RawMessage, len(letters))
			for i, l := range letters {
				rows[i] = []json.RawMessage{jsonString(l.ID), jsonString(compactRaw(l.Item)), jsonString(l.Reason), jsonNumber(l.Attempts), jsonString(l.CreatedAt.Format(time.RFC3339Nano))}
			}
			return writeString(stdout, formatTable([]string{"letter", "item", "reason", "attempts", "created at"}, rows)+
				"("+plural(len(letters), "dead letter")+")\n")
		},
	}
}

// timeLayout shows times to the millisecond, in UTC.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// unixSeconds is t as seconds since the Unix epoch, with a fraction, as the queue REST
// API writes times.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

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
