package herald

import "testing"

func TestWatchPolicy(t *testing.T) {
	p := WatchPolicy{DenyTypes: []string{"Secret", "owns"}}
	for _, c := range []struct {
		mode, subject string
		types         []string
		denied        bool
	}{
		{"consume", "Job", []string{"Job"}, false},
		{"watch", "_Watch", []string{"_Watch"}, false},
		{"consume", "_DeadLetter", []string{"_DeadLetter"}, true},
		{"watch", "Task", []string{"Task", "Secret"}, true},
		{"consume", "Task", []string{"Task", "owns"}, true},
		{"watch", "Task", []string{"Task", "belongs_to"}, false},
	} {
		err := p.Check(c.mode, c.subject, c.types)
		if (err != nil) != c.denied || (err != nil && err.Code != CodeWatchPatternDenied) {
			t.Errorf("%s %s %v: %v, denied %v", c.mode, c.subject, c.types, err, c.denied)
		}
	}
	if err := (WatchPolicy{}).Check("watch", "Secret", []string{"Secret"}); err != nil {
		t.Errorf("the empty policy denied %v", err)
	}
}
