package client

import "testing"

// A dead letter belongs to a queue by the queue its match names, whatever the shape of
// the match: the node itself, "<var>.<field>" columns, or a node inside the match.
func TestQueueLetterMatchShapes(t *testing.T) {
	row := func(match string) []any {
		return []any{"dl1", match, "max_redeliveries", int64(3), "2026-03-01T12:00:00Z", "n1"}
	}
	for _, tc := range []struct {
		match string
		ok    bool
		item  string
	}{
		{`{"_type":"QueueItem","queue":"q","item":"{\"a\":1}","priority":0}`, true, `{"a":1}`},
		{`{"_type":"QueueItem","queue":"q2","item":"1"}`, false, ""},
		{`{"i.queue":"q","i.item":"not json"}`, true, `"not json"`},
		{`{"i":{"_type":"QueueItem","queue":"q","item":"[1]"}}`, true, `[1]`},
		{`{"i.item":"[1]"}`, false, ""},
	} {
		l, ok := letterOf(row(tc.match), "q")
		if ok != tc.ok || (ok && string(l.Item) != tc.item) {
			t.Errorf("%s: ok %v item %s, want %v %s", tc.match, ok, l.Item, tc.ok, tc.item)
		}
		if ok && (l.Attempts != 3 || l.CreatedAt.IsZero() || l.SubjectID != "n1") {
			t.Errorf("%s: letter %+v", tc.match, l)
		}
	}
}
