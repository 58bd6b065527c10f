package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
)

// "herald dlq": the dead letters of every queue model, listed, redriven and purged by
// filter through the Go client (client.DeadLetters, RedriveDeadLetters,
// PurgeDeadLetters).

type dlqFlags struct {
	addr    string
	tls     tlsFlags
	json    bool
	timeout time.Duration
	filter  client.DeadLetterFilter
}

func newDLQCmd(stdout io.Writer) *cobra.Command {
	f := &dlqFlags{}
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List, redrive and purge dead letters of consume groups and queues",
		Long: `Work with the dead letters (_DeadLetter nodes) of a running broker, whatever wrote
them: a consume group's NACK [no_retry] or max_redeliveries, a queue RPC message
(herald.v1.Queues), a REST queue's item rejected by a consume watch.

  ls       list the letters the filter selects, oldest first
  redrive  put them back, in one commit: each message is spawned again for the
           groups that consume its type, at attempt 1
  purge    delete them, in one commit: their messages are gone for good

Filters (all that are given must hold):

  --queue NAME       the queue the message named (its queue attribute)
  --group NAME       the consume group the message was delivered to
  --reason R         no_retry or max_redeliveries_exceeded
  --type T           the type of the dead-lettered node
  --older-than D     written at least D ago (e.g. 1h, 30m)
  --limit N          at most N letters, oldest first

purge without a filter needs --all. redrive and purge need the admin grant. They run
MATCH d: _DeadLetter WHERE … REDRIVE d and … KILL d (see docs/consume.md).
Exit status: 0 on success, 1 when the server refuses or fails (its error code and
message are printed on standard error; with --json also as JSON on standard output),
2 for a usage error.`,
		Example: `  herald dlq ls
  herald dlq ls --queue emails --json
  herald dlq redrive --group workers --reason no_retry
  herald dlq purge --older-than 168h
  herald dlq purge --all`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError(fmt.Errorf("unknown dlq command %q; see herald dlq --help", args[0]))
			}
			return cmd.Help()
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.addr, "addr", defaultAddr(), "broker URL (default from $HERALD_ADDR when set)")
	addTLSFlags(pf, &f.tls)
	pf.BoolVar(&f.json, "json", false, "print JSON instead of tables")
	pf.DurationVar(&f.timeout, "timeout", time.Minute, "time limit of one request")
	pf.StringVar(&f.filter.Queue, "queue", "", "only letters of messages of this queue")
	pf.StringVar(&f.filter.Group, "group", "", "only letters of this consume group")
	pf.StringVar(&f.filter.Reason, "reason", "", "only letters with this failure reason (no_retry, max_redeliveries_exceeded)")
	pf.StringVar(&f.filter.Type, "type", "", "only letters of nodes of this type")
	pf.DurationVar(&f.filter.OlderThan, "older-than", 0, "only letters written at least this long ago")
	pf.IntVar(&f.filter.Limit, "limit", 0, "at most this many letters, oldest first (0: all)")
	purge := newDLQPurgeCmd(f, stdout)
	purge.Flags().BoolVar(&f.filter.All, "all", false, "purge every letter the (possibly empty) filter selects")
	cmd.AddCommand(newDLQListCmd(f, stdout), newDLQRedriveCmd(f, stdout), purge)
	return cmd
}

func newDLQListCmd(f *dlqFlags, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the dead letters the filter selects, oldest first",
		Args:    argCount(0, 0, "dlq ls [filters]"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			c, err := dial(cmd.Context(), f.addr, f.tls, f.timeout)
			if err != nil {
				return err
			}
			defer c.Close()
			letters, err := c.DeadLetters(cmd.Context(), f.filter)
			if err != nil {
				return f.fail(cmd, err)
			}
			if f.json {
				return writeLine(stdout, compactJSON(map[string]any{"dead_letters": letters, "count": len(letters)}))
			}
			rows := make([][]json.RawMessage, len(letters))
			for i, l := range letters {
				rows[i] = []json.RawMessage{jsonString(l.ID), jsonString(orDash(l.Queue)), jsonString(orDash(l.Group)), jsonString(l.Type),
					jsonString(l.SubjectID), jsonString(l.Reason), jsonNumber(l.Attempts), jsonString(formatTime(l.CreatedAt))}
			}
			return writeString(stdout, formatTable([]string{"letter", "queue", "group", "type", "subject", "reason", "attempts", "created at"}, rows)+
				"("+plural(len(letters), "dead letter")+")\n")
		},
	}
}

func newDLQRedriveCmd(f *dlqFlags, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "redrive",
		Short: "Put the dead letters the filter selects back, in one commit",
		Args:  argCount(0, 0, "dlq redrive [filters]"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.settle(cmd, stdout, "redriven", (*client.Client).RedriveDeadLetters)
		},
	}
}

func newDLQPurgeCmd(f *dlqFlags, stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "purge",
		Short: "Delete the dead letters the filter selects, in one commit (every letter: --all)",
		Args:  argCount(0, 0, "dlq purge [filters | --all]"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.filter == (client.DeadLetterFilter{}) {
				return usageError(errors.New("herald dlq purge without a filter deletes every dead letter; give a filter, or --all to mean it"))
			}
			return f.settle(cmd, stdout, "purged", (*client.Client).PurgeDeadLetters)
		},
	}
}

// check refuses filters the server would refuse anyway, as usage errors.
func (f *dlqFlags) check() error {
	if f.filter.OlderThan < 0 || f.filter.Limit < 0 {
		return usageError(fmt.Errorf("--older-than and --limit take zero or more (got %v, %d)", f.filter.OlderThan, f.filter.Limit))
	}
	return nil
}

// settle runs a redrive or a purge and prints how many letters it took.
func (f *dlqFlags) settle(cmd *cobra.Command, stdout io.Writer, verb string, do func(*client.Client, context.Context, client.DeadLetterFilter) (int, error)) error {
	if err := f.check(); err != nil {
		return err
	}
	c, err := dial(cmd.Context(), f.addr, f.tls, f.timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	n, err := do(c, cmd.Context(), f.filter)
	if err != nil {
		return f.fail(cmd, err)
	}
	if f.json {
		return writeLine(stdout, compactJSON(map[string]any{verb: n}))
	}
	return writeLine(stdout, verb+" "+plural(n, "dead letter"))
}

// fail prints a server's refusal (code and message) and exits 1.
func (f *dlqFlags) fail(cmd *cobra.Command, err error) error {
	var he *herald.Error
	if !errors.As(err, &he) {
		return &ExitError{Code: 1, Err: err}
	}
	if f.json {
		_ = writeLine(cmd.OutOrStdout(), errorJSON(he))
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "herald: %s\n", errorText(he))
	return &ExitError{Code: 1, Err: err, Silent: true}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
