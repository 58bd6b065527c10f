package heraldtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/heraldtest"
)

func TestServerAnswersQueries(t *testing.T) {
	srv := heraldtest.NewServer(t)
	if srv.URL() == "" {
		t.Fatal("no URL")
	}
	srv.Exec("node Job { n: Int }", nil)
	srv.Exec("SPAWN j: Job { n = 1 }; SPAWN k: Job { n = 1 }", nil)
	resp := srv.Exec("MATCH j: Job RETURN COUNT(j) AS jobs", nil)
	if got := resp.Last().Rows; len(got) != 1 || got[0][0] != int64(2) {
		t.Fatalf("rows = %v, want [[2]]", got)
	}
	if srv.Client() != srv.Client() {
		t.Fatal("Client returned two different clients")
	}
}

func TestPublishAgainstTheEngine(t *testing.T) {
	srv := heraldtest.NewServer(t)
	ctx := context.Background()
	srv.Exec(`node Job { n: Int, note: String? }`, nil)
	c := srv.Client()
	id, err := c.Publish(ctx, "Job", map[string]any{"n": 7, "note": `"; KILL #x`})
	if err != nil {
		t.Fatal(err)
	}
	resp := srv.Exec("MATCH j: Job WHERE j.id = $id RETURN j.n, j.note", map[string]any{"id": id})
	if rows := resp.Last().Rows; len(rows) != 1 || rows[0][0] != int64(7) || rows[0][1] != `"; KILL #x` {
		t.Fatalf("rows = %v", rows)
	}
	_, err = c.Publish(ctx, "Job", map[string]any{"n": "seven"})
	var he *herald.Error
	if !errors.As(err, &he) || he.Code != herald.CodeTypeMismatch {
		t.Fatalf("Publish with a wrong type: %v, want E2001", err)
	}
}

func TestManualClock(t *testing.T) {
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	srv := heraldtest.NewServer(t, heraldtest.WithManualClock(start))
	if !srv.ManualClock() || !srv.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", srv.Now(), start)
	}
	srv.Advance(90 * time.Second)
	if want := start.Add(90 * time.Second); !srv.Now().Equal(want) || !srv.Clock().Now().Equal(want) {
		t.Fatalf("Now = %v, want %v", srv.Now(), want)
	}
}

func TestStartAndCloseOutsideATest(t *testing.T) {
	srv, err := heraldtest.Start(context.Background(), heraldtest.WithDisk())
	if err != nil {
		t.Fatal(err)
	}
	srv.Exec("node Job { n: Int }", nil)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if srv.Clock() != nil || srv.ManualClock() {
		t.Fatal("a server without WithManualClock reports a manual clock")
	}
}
