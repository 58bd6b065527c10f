package cli

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/herald-mq/herald/server"
)

// reloadOnHangup reads the server's TLS files again on every SIGHUP (tls), or only logs
// that there is nothing to reload, until stop is called; stop waits for the goroutine to
// end.
func reloadOnHangup(s *server.Server, tls bool, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-hup:
				if !tls {
					log.Info("SIGHUP: nothing to reload (the server has no TLS files); it goes on serving")
					continue
				}
				if err := s.ReloadTLS(); err != nil {
					log.Error("SIGHUP: the TLS files were not reloaded; the previous ones stay in use", "err", err)
				}
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(quit)
		<-done
	}
}
