package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
)

type statusFlags struct {
	addr    string
	tls     tlsFlags
	json    bool
	timeout time.Duration
}

// newStatusCmd is herald status: the nodes sharing a broker's store, as that broker
// knows them.
func newStatusCmd(stdout io.Writer) *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the nodes sharing a broker's store: which leads, their positions and lag",
		Long: `Ask a broker what it knows of the nodes sharing its store (GET /v1/cluster) and print
the leader, the leadership term, the node that answered, and a table of the nodes as
each last reported itself:

  name         the node's name (--node-name)
  role         leader or follower, as it last reported; "was leader" for a node
               that reported leading while the lease is another's now
  address      where it serves clients (--advertise)
  seq          the position its graph had applied
  behind       how long its graph had been behind the store (0s: caught up)
  last report  how long ago it reported; a running node reports every quarter of
               the lease's TTL, so an old report is a node that has stopped

Any node answers, leader or follower. A broker on a store of its own (no --store)
leads alone. Exit status: 0 on an answer, 1 when the broker refuses or cannot be
reached (E4025 UNREACHABLE), 2 for a usage error. --json prints the answer as JSON.`,
		Example: `  herald status
  herald status --addr http://127.0.0.1:7421
  herald status --json | jq -r '.leader'`,
		Args: argCount(0, 0, "status [--addr URL] [--json]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStatus(cmd.Context(), f, stdout, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", defaultAddr(), "broker URL (default from $HERALD_ADDR when set)")
	addTLSFlags(fl, &f.tls)
	fl.BoolVar(&f.json, "json", false, "print the answer as JSON")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the answer")
	return cmd
}

func runStatus(ctx context.Context, f statusFlags, stdout, stderr io.Writer) error {
	st, err := askStatus(ctx, f)
	if err != nil {
		var he *herald.Error
		if !errors.As(err, &he) {
			return &ExitError{Code: 1, Err: err}
		}
		if f.json {
			_ = writeLine(stdout, errorJSON(he))
		}
		fmt.Fprintf(stderr, "herald: %s\n", errorText(he))
		return &ExitError{Code: 1, Err: err, Silent: true}
	}
	if f.json {
		return writeLine(stdout, compactJSON(st))
	}
	return writeString(stdout, formatStatus(st))
}

// askStatus dials the broker and asks it for the cluster's status. A broker that
// cannot be dialled is E4025, as Client.Status reports one that stops answering.
func askStatus(ctx context.Context, f statusFlags) (client.ClusterStatus, error) {
	addr := normalizeAddr(f.addr)
	c, err := dial(ctx, addr, f.tls, f.timeout)
	if err != nil {
		return client.ClusterStatus{}, dialFailure(ctx, addr, err)
	}
	defer c.Close()
	return c.Status(ctx)
}

// dialFailure reports a dial that got no answer (client.Unreached) as E4025
// UNREACHABLE; other failures keep their errors.
func dialFailure(ctx context.Context, addr string, err error) error {
	why, timedOut, ok := client.Unreached(ctx, err)
	if !ok {
		return err
	}
	if timedOut {
		why = "no answer within --timeout"
	}
	return &herald.Error{Code: herald.CodeUnreachable, Message: "cannot reach " + addr + ": " + why, Err: err}
}

// formatStatus prints the leader, the node that answered and the table of nodes.
func formatStatus(st client.ClusterStatus) string {
	var b strings.Builder
	switch {
	case st.Leader == "":
		b.WriteString("leader: none: no node holds the lease at the moment; writes wait for one\n")
	case st.Store != "postgres":
		fmt.Fprintf(&b, "leader: %s at %s, on a store of its own\n", st.Name, st.Leader)
	default:
		name := ""
		for _, n := range st.Nodes {
			if n.Address == st.Leader && n.Role == "leader" {
				name = n.Name + " at "
			}
		}
		fmt.Fprintf(&b, "leader: %s%s, term %d\n", name, st.Leader, st.Term)
	}
	fmt.Fprintf(&b, "answered by: %s (%s) at seq %d\n", st.Name, st.Role, st.Seq)
	rows := make([][]json.RawMessage, len(st.Nodes))
	for i, n := range st.Nodes {
		role := n.Role
		if role == "leader" && n.Address != st.Leader {
			role = "was leader" // its report predates the lease's move (it stopped, or was paused)
		}
		rows[i] = []json.RawMessage{jsonString(n.Name), jsonString(role), jsonString(n.Address),
			json.RawMessage(strconv.FormatUint(n.Seq, 10)), jsonString(roundDuration(n.Behind)), jsonString(roundDuration(n.Age) + " ago")}
	}
	b.WriteString(formatTable([]string{"name", "role", "address", "seq", "behind", "last report"}, rows))
	store := st.Store
	if store == "" {
		store = "an unnamed store"
	}
	fmt.Fprintf(&b, "(%s on %s)\n", plural(len(st.Nodes), "node"), store)
	return b.String()
}

// roundDuration shows d to the tenth of a second: "0s", "0.3s", "12.5s", "2m3.4s".
func roundDuration(d time.Duration) string {
	d = d.Round(100 * time.Millisecond)
	if d < time.Minute {
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
	}
	return d.String()
}
