package delivery

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/herald-mq/herald/engine"
	"github.com/herald-mq/herald/store/memstore"
)

// TestEmptyRoundsKeepTheTurn: dispatcher rounds that find no message ready leave a
// group's turn where it is. They moved it on, so that with messages arriving one at a
// time, whichever member the empty rounds left the turn with got every message while
// the other sat idle with room.
func TestEmptyRoundsKeepTheTurn(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := engine.Open(ctx, engine.Config{Backend: memstore.New(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(ctx)
	s := New(Config{Engine: eng, Logger: quiet})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	const w = `WATCH j: TurnJob [mode: consume, group: "turns"] RETURN j.n`
	for range 2 {
		c, err := s.Consume(ctx, "", w, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	s.Flush()
	s.mu.Lock()
	g := s.groups["g:turns"]
	turn := g.rr
	s.mu.Unlock()
	for range 3 {
		s.runOnce()
		s.mu.Lock()
		moved := g.rr != turn
		s.mu.Unlock()
		if moved {
			t.Fatal("a round with nothing ready moved the group's turn on")
		}
	}
}
