package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
)

type watchFlags struct {
	tls       tlsFlags
	addr      string
	json      bool
	after     uint64
	session   string
	params    string
	reconnect int
}

func newWatchCmd(stdout, stderr io.Writer) *cobra.Command {
	var f watchFlags
	cmd := &cobra.Command{
		Use:   "watch 'WATCH … RETURN …'",
		Short: "Print the events of a watch-mode WATCH statement as they arrive",
		Long: `Open a watch-mode stream on a running broker and print its events as they arrive,
one line each, until interrupted or the stream ends.

Each line shows the event type (initial, added, removed, changed, gap, reset,
heartbeat), its position (seq) and tick, and the match as JSON; a changed event also
shows the previous match. With --json each event is printed instead as one JSON object
per line: {"type", "match", "prev", "count", "seq", "tick", "code", "message"}, the
empty fields left out.

When the connection drops the command reconnects and resumes after the last event it
printed. When interrupted it reports that position on standard error; pass it to
--after to continue from there later (the server then replays the changes since, or
sends a reset event and a new snapshot when they are older than its change log keeps).

An error event from the server ends the command with exit status 1. Consume-mode
statements ([mode: consume]) lease messages that must be settled: run them with
"herald consume".`,
		Example: `  herald watch 'WATCH t: Task WHERE t.status = "done" RETURN t'
  herald watch --json 'WATCH t: Task [delivery: reliable] RETURN t.title, t.status' | jq .
  herald watch --after 42 'WATCH t: Task [delivery: reliable] RETURN t'
  herald watch --params '{"owner": "ann"}' 'WATCH t: Task WHERE t.owner = $owner RETURN t'`,
		Args: oneStatement("watch"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWatch(cmd.Context(), f, args[0], stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", defaultAddr(), "broker URL (default from $HERALD_ADDR when set)")
	addTLSFlags(fl, &f.tls)
	fl.BoolVar(&f.json, "json", false, "print one JSON object per event")
	fl.Uint64Var(&f.after, "after", 0, "resume after this position (the seq of the last event seen)")
	fl.StringVar(&f.session, "session", "", "open the stream in this session")
	fl.StringVar(&f.params, "params", "", "the statement's $parameters as a JSON object")
	fl.IntVar(&f.reconnect, "reconnect", client.DefaultReconnect, "reconnect attempts in a row after a dropped connection; 0 disables")
	return cmd
}

func runWatch(ctx context.Context, f watchFlags, statement string, stdout, stderr io.Writer) error {
	params, err := parseParams(f.params)
	if err != nil {
		return err
	}
	if f.reconnect < 0 {
		return usageError(fmt.Errorf("--reconnect %d: want at least 0", f.reconnect))
	}
	if consumeMode(statement) {
		return usageError(errors.New("this WATCH is in consume mode: its messages are leased and must be settled; run it with herald consume"))
	}
	c, err := dial(ctx, f.addr, f.tls, 0)
	if err != nil {
		return err
	}
	defer c.Close()
	opts := []client.WatchOption{client.ResumeAfter(f.after), client.WithReconnect(f.reconnect)}
	if params != nil {
		opts = append(opts, client.WithParams(params))
	}
	if f.session != "" {
		opts = append(opts, client.WithSession(f.session))
	}
	w, err := c.Watch(ctx, statement, opts...)
	if err != nil {
		return err
	}
	defer w.Close()
	for {
		ev, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				if pos := w.Position(); pos > 0 {
					fmt.Fprintf(stderr, "stopped after seq %d (resume with --after %d)\n", pos, pos)
				}
				return nil
			}
			var he *herald.Error
			if f.json && errors.As(err, &he) {
				fmt.Fprintln(stdout, compactJSON(map[string]any{"type": herald.EventError, "code": he.Code, "message": he.Message}))
			}
			return &ExitError{Code: 1, Err: err}
		}
		if ev.Type == herald.EventWarning && !f.json {
			fmt.Fprintf(stderr, "warning: %s %s\n", ev.Code, ev.Message)
			continue
		}
		line := formatEvent(ev)
		if f.json {
			line = eventJSON(ev)
		}
		if _, err := io.WriteString(stdout, line+"\n"); err != nil {
			return err
		}
	}
}

// eventJSON renders an event as one line of JSON.
func eventJSON(ev client.Event) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	ev.Match, ev.Prev = jsonMap(ev.Match), jsonMap(ev.Prev)
	if err := enc.Encode(ev); err != nil {
		return fmt.Sprintf(`{"type":%q,"seq":%d}`, ev.Type, ev.Seq)
	}
	return strings.TrimRight(buf.String(), "\n")
}

// formatEvent renders an event as one line for people:
//
//	changed seq=4 tick=4 {"id":"t1","title":"z"} prev={"id":"t1","title":"a"}
func formatEvent(ev client.Event) string {
	var b strings.Builder
	b.WriteString(ev.Type)
	b.WriteString(" seq=" + strconv.FormatUint(ev.Seq, 10))
	b.WriteString(" tick=" + strconv.FormatUint(ev.Tick, 10))
	if ev.Type == herald.EventGap || ev.Count != 0 {
		b.WriteString(" count=" + strconv.Itoa(ev.Count))
	}
	if ev.Match != nil {
		b.WriteString(" " + compactJSON(jsonMap(ev.Match)))
	}
	if ev.Prev != nil {
		b.WriteString(" prev=" + compactJSON(jsonMap(ev.Prev)))
	}
	if ev.Code != "" {
		b.WriteString(" " + string(ev.Code))
	}
	if ev.Message != "" {
		b.WriteString(" " + escapeControls(ev.Message))
	}
	return b.String()
}

func compactJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimRight(buf.String(), "\n")
}
