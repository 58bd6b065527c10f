// Command herald is Herald's single binary: the broker (herald serve), the query shell
// (herald query) and the version report (herald version).
// All the work happens in internal/cli; main only wires signals and the exit status.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/herald-mq/herald/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, restore the default handling so a second one ends
		// the process at once instead of waiting for a graceful shutdown.
		<-ctx.Done()
		stop()
	}()
	err := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode(err))
}
