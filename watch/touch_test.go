package watch

import (
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/lang/option"
	"github.com/herald-mq/herald/standing"
)

// Deciding which streams a change touches allocates nothing: the dispatcher does it for
// every change of every commit, watched or not.
func TestTouchingAChangeAllocatesNothing(t *testing.T) {
	w := &watcher{}
	stmt, file, err := standing.Parse(`WATCH t: Task WHERE t.n > 1 RETURN t`, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := standing.Compile(standing.Source{Stmt: stmt, File: file, Mode: option.Watch, Clock: clock.Real()})
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{index: standing.NewIndex[*watcher]()}
	s.touchFn = s.touchLocked
	s.index.Add(q, w)
	changes := []herald.Change{
		{Kind: herald.NodeChange, NodeAfter: &herald.Node{ID: "a", Type: "Task"}},
		{Kind: herald.NodeChange, NodeBefore: &herald.Node{ID: "a", Type: "Task"}, NodeAfter: &herald.Node{ID: "a", Type: "Job"}},
	}
	cs := &herald.ChangeSet{Seq: 1, Changes: changes}
	touch := func() {
		for _, ch := range changes {
			s.dispMark++
			s.touchChangeLocked(ch, cs)
		}
		s.touched = s.touched[:0]
	}
	touch() // the touched list's first array
	if n := testing.AllocsPerRun(100, touch); n != 0 {
		t.Fatalf("touching two changes allocates %.1f times", n)
	}
	touch()
	s.dispMark++
	s.touchChangeLocked(changes[1], cs)
	if len(s.touched) != 1 || s.touched[0] != w {
		t.Fatalf("a change from Task to Job touched %v; want the Task watcher", s.touched)
	}
}
