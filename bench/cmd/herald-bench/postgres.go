package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/herald-mq/herald/bench"
	heraldbench "github.com/herald-mq/herald/bench/herald"
	"github.com/herald-mq/herald/server"
	"github.com/herald-mq/herald/store/pgstore"
)

// The herald-pg system: Herald on its PostgreSQL store, `herald serve --store
// postgres://… --store-schema S`, measured beside the embedded Pebble store (herald)
// and the peers in one run. Each run has a schema of its own, created before the server
// starts and dropped once it has stopped.

// heraldPG is the name of the system in --peers and in the report.
const heraldPG = "herald-pg"

// pgDSNEnv names the environment variable that gives --pg-dsn its default.
const pgDSNEnv = "HERALD_BENCH_PG_DSN"

// defaultPGDSN is --pg-dsn's default when pgDSNEnv is unset.
const defaultPGDSN = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// pgDSNDefault returns --pg-dsn's default: $HERALD_BENCH_PG_DSN, or defaultPGDSN.
func pgDSNDefault() string {
	if v := os.Getenv(pgDSNEnv); v != "" {
		return v
	}
	return defaultPGDSN
}

// pgSchemaPrefix starts the name of every schema the bench makes.
const pgSchemaPrefix = "herald_bench_"

// newPGSchema returns a fresh schema name for one run.
func newPGSchema() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return pgSchemaPrefix + hex.EncodeToString(b[:])
}

// isPostgresDSN reports whether dsn is a URL that herald serve --store takes.
func isPostgresDSN(dsn string) bool { return server.IsPostgres(dsn) }

// redactDSN hides the password of a connection string, for reports and messages.
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
	}
	return dsn
}

// failedStart is an error of a system that was reachable but could not be started:
// the report shows it as a failure of every scenario, not as a system left out.
type failedStart struct{ err error }

func (e *failedStart) Error() string { return e.err.Error() }
func (e *failedStart) Unwrap() error { return e.err }

// pgServer is what the bench learned of the PostgreSQL server before it started Herald
// on it.
type pgServer struct {
	addr     string // host:port, or a Unix socket's path
	loopback bool   // addr is on this machine's loopback
	unix     bool
	version  string
	// The settings that decide when a commit is durable, as the store's sessions see
	// them (the database's and the role's defaults).
	syncCommit, fsync, walSync string
}

// preparePG checks that PostgreSQL answers at dsn, reads the settings that make its
// commits durable, and creates schema, which must not exist yet. A server that cannot
// be reached at all comes back as a plain error (the system is then unavailable); one
// that answers but refuses the connection or the schema, as a failedStart.
func preparePG(ctx context.Context, dsn, schema string) (pgServer, error) {
	network, addr, loopback, err := pgstore.Address(dsn)
	if err != nil {
		return pgServer{}, &failedStart{fmt.Errorf("--pg-dsn %s: %w", redactDSN(dsn), err)}
	}
	srv := pgServer{addr: addr, unix: network == "unix", loopback: loopback && network == "tcp"}
	c, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return srv, fmt.Errorf("PostgreSQL is not reachable at %s (--pg-dsn, default $%s): %w", addr, pgDSNEnv, err)
	}
	c.Close()
	d, err := pgstore.Describe(ctx, dsn)
	if err != nil {
		return srv, &failedStart{fmt.Errorf("PostgreSQL at %s answers but the bench cannot read it: %w", addr, err)}
	}
	srv.version, srv.syncCommit, srv.fsync, srv.walSync = d.Version, d.SyncCommit, d.Fsync, d.WALSync
	if err := pgstore.CreateSchema(ctx, dsn, schema); err != nil {
		return srv, &failedStart{fmt.Errorf("creating schema %s at %s: %w", schema, addr, err)}
	}
	return srv, nil
}

// dropPGSchema drops a schema the bench made, with everything in it.
func dropPGSchema(dsn, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return pgstore.DropSchema(ctx, dsn, schema)
}

// durability is the herald-pg system's line in the report's durability table.
func (s pgServer) durability(how string) string {
	where := "over TCP"
	switch {
	case s.unix:
		where = "over a Unix socket"
	case s.loopback:
		where = "over loopback TCP"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s, PostgreSQL %s store at %s %s: every commit (publish, lease, ACK, NACK) is one PostgreSQL transaction, answered once PostgreSQL has committed it", how, s.version, s.addr, where)
	sc := s.syncCommit
	if sc == "off" {
		sc = "on (the server's default is off; the store sets on for its sessions)"
	}
	fmt.Fprintf(&b, "; synchronous_commit %s, fsync %s (wal_sync_method %s)", sc, s.fsync, s.walSync)
	if s.fsync == "off" {
		b.WriteString(": PostgreSQL does not flush its WAL, and a crash of the machine can lose answered commits")
	} else {
		b.WriteString(": each commit's WAL is flushed to disk before PostgreSQL answers")
	}
	return b.String()
}

// heraldPGMode says, for the report, how the herald-pg system ran.
func heraldPGMode(f benchFlags) string {
	where := fmt.Sprintf("PostgreSQL at %s, schema %s, new for this run and dropped at its end", redactDSN(f.pgDSN), f.pgSchema)
	if f.inProcess {
		return "**in-process** (--in-process): the server runs inside the bench's process and shares its CPUs and garbage collector with the clients; for profiling only, not comparable with the peers; " + where
	}
	bin := "herald-bench's own copy of the herald command"
	if f.heraldBin != "" {
		bin = f.heraldBin
	}
	return fmt.Sprintf("a separate `herald serve --store %s --store-schema %s` process (%s), the server's defaults otherwise; %s",
		redactDSN(f.pgDSN), f.pgSchema, bin, where)
}

// openHeraldPG makes the run's schema, starts Herald on it (a `herald serve --store`
// process, or with f.inProcess a server in this process) and connects to it. stop stops
// the server and drops the schema; a schema it cannot drop is reported on warn.
func openHeraldPG(ctx context.Context, f benchFlags, warn io.Writer) (bench.Broker, func(), error) {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	pg, err := preparePG(pctx, f.pgDSN, f.pgSchema)
	cancel()
	var failed *failedStart
	if err != nil && !errors.As(err, &failed) {
		return nil, nil, err // unreachable: nothing was made
	}
	drop := func() {
		if derr := dropPGSchema(f.pgDSN, f.pgSchema); derr != nil {
			fmt.Fprintf(warn, "herald-bench: could not drop schema %s at %s (drop it with DROP SCHEMA %s CASCADE): %v\n",
				f.pgSchema, pg.addr, f.pgSchema, derr)
		}
	}
	if err != nil {
		return nil, nil, err // reachable, but refused; the schema was not made
	}
	fail := func(err error) (bench.Broker, func(), error) {
		drop()
		return nil, nil, &failedStart{err}
	}
	var stopServer func()
	var url, how string
	if f.inProcess {
		srv := server.New(server.Config{
			Listen:      "127.0.0.1:0",
			Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
			Store:       f.pgDSN,
			StoreSchema: f.pgSchema,
		})
		if err := srv.Start(ctx); err != nil {
			return fail(fmt.Errorf("starting the in-process server on PostgreSQL: %w", err))
		}
		stopServer = func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = srv.Stop(sctx)
		}
		url, how = "http://"+srv.Addr(), "in-process server (profiling only)"
	} else {
		p, err := startHeraldPGProcess(ctx, f.heraldBin, f.pgDSN, f.pgSchema)
		if err != nil {
			return fail(fmt.Errorf("herald serve --store %s --store-schema %s: %w", redactDSN(f.pgDSN), f.pgSchema, err))
		}
		stopServer, url, how = p.stop, p.url, "herald serve --store process"
	}
	stop := func() {
		stopServer()
		drop()
	}
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := heraldbench.Open(octx, url, pg.durability(how), nil)
	if err == nil {
		if cerr := b.Check(octx); cerr != nil {
			b.Close()
			b, err = nil, fmt.Errorf("consume-mode watches not served: %w", cerr)
		}
	}
	if err != nil {
		stop()
		return nil, nil, &failedStart{err}
	}
	return b.Named(heraldPG), stop, nil
}

// failedSystem is the report's row of a system that was reachable but could not be
// started: every scenario failed, with the reason.
func failedSystem(name string, scenarios []string, err error) bench.System {
	sys := bench.System{Name: name, Results: make(map[string]bench.Result, len(scenarios))}
	for _, sc := range scenarios {
		sys.Results[sc] = bench.Result{Scenario: sc, Err: "start: " + strings.Join(strings.Fields(err.Error()), " ")}
	}
	return sys
}
