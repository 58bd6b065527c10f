package client

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/herald-mq/herald"
)

// QueueStats counts the items of one queue of the queue REST API.
type QueueStats struct {
	Queue string `json:"queue"`
	// Items counts the queue's QueueItem nodes, held by a lock or not.
	Items int `json:"items"`
	// Ready is Items minus Locked: an upper bound on what a pop can take, since an item
	// leased by some other consume-mode watch on QueueItem counts as ready.
	Ready int `json:"ready"`
	// Locked counts the items held by the queue's active lock, and LockExpiresAt says
	// when that lock expires (nil without one).
	Locked        int        `json:"locked"`
	LockExpiresAt *time.Time `json:"lock_expires_at,omitempty"`
	// Priorities counts the items per priority; an item written by hand with a priority
	// that is not a whole number counts in Items only.
	Priorities map[int64]int `json:"priorities"`
}

// statsQuery reads the items per queue and priority, and the active locks, of every
// queue or (with $queue) of one.
func statsQuery(one bool) string {
	where, lockWhere := "", ""
	if one {
		where, lockWhere = " WHERE i.queue = $queue", " AND l.queue = $queue"
	}
	return "MATCH i: QueueItem" + where + " RETURN i.queue, i.priority, COUNT(i);\n" +
		"MATCH l: _QueueLock WHERE l.expires_at > now()" + lockWhere + " RETURN l.queue, l.delivery_handles, l.expires_at"
}

// QueueStats counts the items of every queue that holds items or a lock, in the order
// of their ids. It reads them with a query, so the principal needs read:QueueItem and
// read:_QueueLock.
func (c *Client) QueueStats(ctx context.Context) ([]QueueStats, error) {
	resp, err := c.Exec(ctx, statsQuery(false), nil)
	if err != nil {
		return nil, err
	}
	return collectStats(resp)
}

// Stats counts the items of the queue (see Client.QueueStats). A queue exists while it
// holds items or a lock: one that holds neither, never pushed to or drained, is refused
// with E4007, so that a mistyped id does not read as an empty queue.
func (q *Queue) Stats(ctx context.Context) (QueueStats, error) {
	if !ValidQueueID(q.id) {
		return QueueStats{}, invalid("queue id %q is invalid: use 1 to %d characters from letters, digits and - _ . ~ :", q.id, MaxQueueIDLength)
	}
	resp, err := q.c.Exec(ctx, statsQuery(true), map[string]any{"queue": q.id})
	if err != nil {
		return QueueStats{}, err
	}
	all, err := collectStats(resp)
	if err != nil {
		return QueueStats{}, err
	}
	if len(all) == 0 {
		return QueueStats{}, herald.Errorf(herald.CodeNotFound, "no queue %q: it holds no items and no lock", q.id)
	}
	return all[0], nil
}

// collectStats folds the two results of statsQuery into one QueueStats per queue.
func collectStats(resp *Response) ([]QueueStats, error) {
	if len(resp.Results) != 2 {
		return nil, herald.Errorf(herald.CodeInternal, "client: queue stats: %d results, want 2", len(resp.Results))
	}
	byQueue := map[string]*QueueStats{}
	get := func(q string) *QueueStats {
		s := byQueue[q]
		if s == nil {
			s = &QueueStats{Queue: q, Priorities: map[int64]int{}}
			byQueue[q] = s
		}
		return s
	}
	for _, row := range resp.Results[0].Rows {
		if len(row) != 3 {
			return nil, herald.Errorf(herald.CodeInternal, "client: queue stats: unexpected QueueItem row %v", row)
		}
		q, ok1 := row[0].(string)
		n, ok2 := row[2].(int64)
		if !ok1 || !ok2 {
			continue // an item written by hand without a string queue
		}
		s := get(q)
		s.Items += int(n)
		if p, ok := row[1].(int64); ok {
			s.Priorities[p] += int(n)
		}
	}
	for _, row := range resp.Results[1].Rows {
		if len(row) != 3 {
			return nil, herald.Errorf(herald.CodeInternal, "client: queue stats: unexpected _QueueLock row %v", row)
		}
		q, ok1 := row[0].(string)
		ids, ok2 := row[1].([]any)
		exp, err := parseTime(row[2])
		if !ok1 || !ok2 || err != nil {
			return nil, herald.Errorf(herald.CodeInternal, "client: queue stats: unexpected _QueueLock row %v", row)
		}
		s := get(q)
		s.Locked = len(ids)
		s.LockExpiresAt = &exp
	}
	out := make([]QueueStats, 0, len(byQueue))
	for _, s := range byQueue {
		s.Ready = max(s.Items-s.Locked, 0)
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out, nil
}

// parseTime reads a timestamp as Exec hands it out (RFC 3339 text).
func parseTime(x any) (time.Time, error) {
	s, ok := x.(string)
	if !ok {
		return time.Time{}, fmt.Errorf("not a timestamp: %v", x)
	}
	return time.Parse(time.RFC3339Nano, s)
}

// DeadLetter is a dead letter of a queue's item.
type DeadLetter struct {
	ID        string          `json:"id"`
	Item      json.RawMessage `json:"item"`
	Priority  *int64          `json:"priority,omitempty"`
	Reason    string          `json:"failure_reason"`
	Attempts  int             `json:"delivery_attempts"`
	CreatedAt time.Time       `json:"created_at"`
	SubjectID string          `json:"subject_id"`
}

// DeadLetters lists the dead letters (_DeadLetter nodes) of the queue's items, oldest
// first. Pops never dead-letter: letters come from other consume-mode watches on
// QueueItem (max_redeliveries, NACK [no_retry]). A letter belongs to the queue when
// its original match names it — the match's "queue" field, a "<var>.queue" column, or
// the queue of a QueueItem node inside the match; a letter whose match carries no
// queue cannot be placed and is not listed. REDRIVE "<id>" brings one back.
func (q *Queue) DeadLetters(ctx context.Context) ([]DeadLetter, error) {
	resp, err := q.c.Exec(ctx, `MATCH d: _DeadLetter WHERE d.subject_type = "QueueItem" `+
		`RETURN d.id, d.original_match, d.failure_reason, d.delivery_attempts, d.created_at, d.subject_id ORDER BY d.created_at`, nil)
	if err != nil {
		return nil, err
	}
	letters := []DeadLetter{}
	for _, row := range resp.Last().Rows {
		if l, ok := letterOf(row, q.id); ok {
			letters = append(letters, l)
		}
	}
	return letters, nil
}

// letterOf decodes a dead-letter row and reports whether it belongs to queue.
func letterOf(row []any, queue string) (DeadLetter, bool) {
	var l DeadLetter
	if len(row) != 6 {
		return l, false
	}
	var ok bool
	l.ID, ok = row[0].(string)
	match, ok2 := row[1].(string)
	if !ok || !ok2 {
		return l, false
	}
	l.Reason, _ = row[2].(string)
	attempts, _ := row[3].(int64)
	l.Attempts = int(attempts)
	l.CreatedAt, _ = parseTime(row[4])
	l.SubjectID, _ = row[5].(string)
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(match), &m) != nil {
		return l, false
	}
	node := queueItemIn(m, queue)
	if node == nil {
		return l, false
	}
	l.Item = itemJSON(node["item"])
	var p int64
	if json.Unmarshal(node["priority"], &p) == nil {
		l.Priority = &p
	}
	return l, true
}

// queueItemIn finds the fields of a QueueItem of queue in a match: the match itself
// (RETURN i), its "<var>.<field>" columns, or a node value inside it.
func queueItemIn(m map[string]json.RawMessage, queue string) map[string]json.RawMessage {
	is := func(raw json.RawMessage) bool {
		var s string
		return json.Unmarshal(raw, &s) == nil && s == queue
	}
	if raw, ok := m["queue"]; ok {
		if is(raw) {
			return m
		}
		return nil
	}
	for k, raw := range m {
		if v, ok := strings.CutSuffix(k, ".queue"); ok && is(raw) {
			cols := map[string]json.RawMessage{}
			for k2, raw2 := range m {
				if f, ok := strings.CutPrefix(k2, v+"."); ok {
					cols[f] = raw2
				}
			}
			return cols
		}
	}
	for _, raw := range m {
		var inner map[string]json.RawMessage
		if json.Unmarshal(raw, &inner) == nil && is(inner["queue"]) {
			return inner
		}
	}
	return nil
}

// itemJSON turns a stored item (compact JSON text in a string) back into JSON; a text
// that is not JSON stays a JSON string, as a pop would return it.
func itemJSON(raw json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if json.Valid([]byte(s)) {
			return json.RawMessage(s)
		}
		return raw
	}
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}
