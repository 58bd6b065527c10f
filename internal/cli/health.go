package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/herald-mq/herald/client"
)

type healthFlags struct {
	addr    string
	tls     tlsFlags
	timeout time.Duration
	live    bool
}

// newHealthCmd is herald health: a probe for container health checks and scripts, which
// asks a broker's /readyz (or /healthz) and answers with its exit status.
func newHealthCmd(stdout io.Writer) *cobra.Command {
	var f healthFlags
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Check that a broker is ready (exit status 0) or not (1)",
		Long: `Ask a broker's /readyz whether it takes requests: print "ready" and exit with
status 0, or print why not and exit with 1. With --live, ask /healthz instead: whether
the process serves HTTP at all. The health endpoints need no credentials, so the
command needs none, only the CA of a broker that speaks TLS.

It is the HEALTHCHECK of the container image: a program of the image's own, where the
image has no shell or curl.`,
		Example: `  herald health
  herald health --addr https://herald.internal:7420 --ca /etc/herald/ca.pem
  herald health --live --timeout 2s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runHealth(cmd.Context(), f, stdout)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", defaultAddr(), "broker URL (default from $HERALD_ADDR when set)")
	addTLSFlags(fl, &f.tls)
	fl.DurationVar(&f.timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	fl.BoolVar(&f.live, "live", false, "ask /healthz (the process is up) rather than /readyz (it takes requests)")
	return cmd
}

func runHealth(ctx context.Context, f healthFlags, stdout io.Writer) error {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if f.tls.ca != "" || f.tls.cert != "" || f.tls.key != "" {
		c, err := client.LoadTLSConfig(f.tls.ca, f.tls.cert, f.tls.key)
		if err != nil {
			return usageError(err)
		}
		tr.TLSClientConfig = c
	}
	hc := &http.Client{Transport: tr, Timeout: f.timeout}
	defer hc.CloseIdleConnections()
	path, want := "/readyz", "ready"
	if f.live {
		path, want = "/healthz", "ok"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, normalizeAddr(f.addr)+path, nil)
	if err != nil {
		return usageError(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", f.addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var answer struct {
		Status string `json:"status"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &answer)
	if resp.StatusCode == http.StatusOK && answer.Status == want {
		_, err := fmt.Fprintln(stdout, want)
		return err
	}
	if answer.Error != nil {
		return errors.New("not " + want + ": " + answer.Error.Code + " " + answer.Error.Message)
	}
	return fmt.Errorf("not %s: %s answered %s", want, path, resp.Status)
}
