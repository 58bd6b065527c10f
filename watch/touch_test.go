package watch

import (
	"testing"

	"github.com/herald-mq/herald"
)

// Deciding which streams a change touches allocates nothing: the dispatcher does it for
// every change of every commit, watched or not.
func TestTouchingAChangeAllocatesNothing(t *testing.T) {
	w := &watcher{}
	s := &Service{byType: map[string]map[*watcher]bool{"Task": {w: true}}}
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
