package lockqueue

import (
	"regexp"
	"testing"
	"time"
)

// TestQueueOfGroup: the group of a queue's pops names the queue back (its metrics'
// queue label); other groups name none.
func TestQueueOfGroup(t *testing.T) {
	m := regexp.MustCompile(`group: "([^"]*)"`).FindStringSubmatch(consumeStatement("mail:eu", 30*time.Second))
	if m == nil {
		t.Fatal("no group in the consume statement")
	}
	if got := QueueOfGroup(m[1]); got != "mail:eu" {
		t.Errorf("QueueOfGroup(%q) = %q, want mail:eu", m[1], got)
	}
	for _, g := range []string{"", "workers", "queue:mail", "queue:mail:xs", "queue-rpc:mail:ab12"} {
		if got := QueueOfGroup(g); got != "" {
			t.Errorf("QueueOfGroup(%q) = %q, want none", g, got)
		}
	}
}
