package namedqueue

import (
	"regexp"
	"testing"

	"github.com/herald-mq/herald/broker"
)

// TestQueueOfGroup: the group of a queue's consume statement, fair or not, names the
// queue back (its metrics' queue label); other groups name none.
func TestQueueOfGroup(t *testing.T) {
	group := regexp.MustCompile(`group: "([^"]*)"`)
	for _, fair := range []bool{true, false} {
		c := config{QueueConfig: broker.QueueConfig{Name: "orders.eu", VisibilityTimeout: 30e9}, incarnation: "ab12cd34", dlqNodeID: "dlq"}
		m := group.FindStringSubmatch(statement(c, fair))
		if m == nil {
			t.Fatalf("no group in %s", statement(c, fair))
		}
		if got := QueueOfGroup(m[1]); got != "orders.eu" {
			t.Errorf("QueueOfGroup(%q) = %q, want orders.eu", m[1], got)
		}
	}
	for _, g := range []string{"", "workers", "queue:orders:30s", "queue-rpc:"} {
		if got := QueueOfGroup(g); got != "" {
			t.Errorf("QueueOfGroup(%q) = %q, want none", g, got)
		}
	}
}
