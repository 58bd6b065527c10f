// Package cli implements the herald command line: serve runs a server, and query, watch,
// consume, queue, token and status are clients of one, written on the Go SDK (package client).
// Each command runs through Run with explicit arguments and streams, so tests drive it
// without a process.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// ExitError carries the exit status a command wants. Silent means the command already
// reported the problem, so Run prints nothing more.
type ExitError struct {
	Code   int
	Err    error
	Silent bool
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode maps the error returned by Run to a process exit status: 0 for nil, the
// code of an *ExitError, 2 for usage errors, and 1 otherwise.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}

func usageError(err error) error { return &ExitError{Code: 2, Err: err} }

// Run executes the herald command line with args (without the program name). It prints
// errors to stderr itself and returns them so that main can choose the exit status.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		var ee *ExitError
		if !errors.As(err, &ee) || !ee.Silent {
			fmt.Fprintf(stderr, "herald: %v\n", err)
		}
	}
	return err
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "herald",
		Short: "Herald is a durable message broker built on a typed property graph",
		Long: `Herald stores messages as nodes of a typed property graph and serves them
through a query language. Run a broker with "herald serve" and talk to it with
"herald query".`,
		Example: `  herald serve --data ./herald-data
  herald query -e 'MATCH j: Job RETURN j.status, COUNT(j)'
  herald version`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	root.AddCommand(newServeCmd(), newQueryCmd(stdin, stdout, stderr), newVersionCmd(stdout), newWatchCmd(stdout, stderr), newConsumeCmd(stdout, stderr))
	root.AddCommand(newQueueCmd(stdout), newTokenCmd(stdout), newHealthCmd(stdout), newStatusCmd(stdout), newDLQCmd(stdout))
	return root
}

// argCount checks a command's number of arguments: a usage error naming its usage
// ("herald " + usage) otherwise.
func argCount(min, max int, usage string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			return usageError(fmt.Errorf("usage: herald %s (got %d arguments)", usage, len(args)))
		}
		return nil
	}
}

// oneStatement checks that a command got one statement, quoted as one argument.
func oneStatement(command string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError(fmt.Errorf("%s takes one WATCH statement, quoted as one argument; got %d arguments", command, len(args)))
		}
		return nil
	}
}
