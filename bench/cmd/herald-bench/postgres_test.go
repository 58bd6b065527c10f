package main

import (
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald/bench"
	"github.com/herald-mq/herald/internal/testutil"
	"github.com/herald-mq/herald/store/pgstore"
)

// TestPGDSNDefault: --pg-dsn defaults to $HERALD_BENCH_PG_DSN, else the local server.
func TestPGDSNDefault(t *testing.T) {
	t.Setenv(pgDSNEnv, "")
	if got := newBenchCmd(nil, nil).Flags().Lookup("pg-dsn").DefValue; got != defaultPGDSN {
		t.Errorf("--pg-dsn default %q, want %q", got, defaultPGDSN)
	}
	const dsn = "postgres://bench@db.example:6432/herald?sslmode=disable"
	t.Setenv(pgDSNEnv, dsn)
	if got := newBenchCmd(nil, nil).Flags().Lookup("pg-dsn").DefValue; got != dsn {
		t.Errorf("--pg-dsn default %q with $%s set, want %q", got, pgDSNEnv, dsn)
	}
	if got := redactDSN("postgres://u:secret@h:1/db"); strings.Contains(got, "secret") {
		t.Errorf("redactDSN kept the password: %s", got)
	}
	if a, b := newPGSchema(), newPGSchema(); a == b || !strings.HasPrefix(a, pgSchemaPrefix) {
		t.Errorf("schemas %q and %q", a, b)
	}
}

// TestBenchHeraldPGUnreachable: with nothing listening at --pg-dsn, herald-pg is
// skipped as unavailable, saying that PostgreSQL is not reachable and where, and the
// other systems still run.
func TestBenchHeraldPGUnreachable(t *testing.T) {
	stdout, stderr, err := runBenchArgs(t, "--peers", "herald-pg,redis", "--no-progress", "--json",
		"--pg-dsn", "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable", "--redis-addr", "127.0.0.1:1")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	rep := decodeReport(t, stdout)
	if len(rep.Systems) != 2 {
		t.Fatalf("systems %+v", rep.Systems)
	}
	s := rep.Systems[0]
	if s.Name != "herald-pg" || !strings.Contains(s.Unavailable, "PostgreSQL is not reachable at 127.0.0.1:1") || len(s.Results) != 0 {
		t.Errorf("herald-pg = %+v, want unavailable: PostgreSQL is not reachable", s)
	}
	if rep.HeraldPG == "" || rep.Herald != "" {
		t.Errorf("report says Herald ran as %q and herald-pg as %q", rep.Herald, rep.HeraldPG)
	}
}

type decodedReport struct {
	Herald   string
	HeraldPG string `json:"herald_pg"`
	Systems  []bench.System
}

func decodeReport(t *testing.T, stdout string) decodedReport {
	t.Helper()
	var rep decodedReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v in %s", err, stdout)
	}
	return rep
}

// TestBenchHeraldPGRefused: a PostgreSQL that answers but refuses the bench (here, a
// database that does not exist) is not skipped: every scenario of herald-pg fails,
// with the reason.
func TestBenchHeraldPGRefused(t *testing.T) {
	u, err := url.Parse(testutil.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/herald_bench_no_such_database"
	stdout, stderr, err := runBenchArgs(t, "--peers", "herald-pg", "--scenarios", "s1,s2", "--no-progress", "--json", "--pg-dsn", u.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	rep := decodeReport(t, stdout)
	if len(rep.Systems) != 1 || rep.Systems[0].Unavailable != "" || len(rep.Systems[0].Results) != 2 {
		t.Fatalf("systems %+v, want herald-pg failed, not unavailable", rep.Systems)
	}
	for sc, res := range rep.Systems[0].Results {
		if !strings.Contains(res.Err, "start: PostgreSQL at ") || !strings.Contains(res.Err, "herald_bench_no_such_database") {
			t.Errorf("%s: error %q", sc, res.Err)
		}
	}
}

// TestBenchHeraldPG runs a tiny workload against Herald on both stores in one run, each
// a herald serve process: the report has herald-pg's row and durability, its figures
// over Herald's on Pebble and over the peers, and the run's schema is gone afterwards.
func TestBenchHeraldPG(t *testing.T) {
	dsn := testutil.PostgresDSN(t)
	stdout, stderr, err := runBenchArgs(t, "--peers", "herald,herald-pg", "--messages", "100",
		"--rate", "100", "--duration", "300ms", "--timeout", "20s", "--no-progress", "--pg-dsn", dsn)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if strings.Contains(stdout, "(unavailable)") || strings.Contains(stdout, "error") || strings.Contains(stdout, "**no**") {
		t.Fatalf("a system or scenario failed:\n%s\n%s", stdout, stderr)
	}
	for _, want := range []string{
		"Herald on PostgreSQL (herald-pg): a separate `herald serve --store " + redactDSN(dsn) + " --store-schema herald_bench_",
		"\n| herald-pg | ",
		"| herald-pg ÷ herald | ",
		"| herald-pg | herald serve --store process, PostgreSQL ",
		"every commit (publish, lease, ACK, NACK) is one PostgreSQL transaction, answered once PostgreSQL has committed it; synchronous_commit ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
	schema := regexp.MustCompile(`--store-schema (herald_bench_[0-9a-f]+)`).FindStringSubmatch(stdout)
	if schema == nil {
		t.Fatalf("no schema in the report:\n%s", stdout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Creating it again succeeds only if the run dropped it.
	if err := pgstore.CreateSchema(ctx, dsn, schema[1]); err != nil {
		t.Errorf("schema %s was not dropped at the end of the run: %v", schema[1], err)
	}
	testutil.DropSchema(dsn, schema[1])
}
