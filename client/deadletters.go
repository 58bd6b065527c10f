package client

import (
	"context"
	"encoding/json"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

// DeadLetterFilter selects dead letters (_DeadLetter nodes) of every queue model: the
// consume groups', the REST queues' items and the queue RPC's messages. The fields
// that are set must all hold; the zero filter selects every letter.
type DeadLetterFilter struct {
	// Queue selects the letters of messages that named this queue (their queue
	// attribute): a REST queue's items, a queue RPC queue's messages, or any message
	// with a queue attribute.
	Queue string
	// Group selects the letters of messages delivered to this consume group.
	Group string
	// Reason selects by failure reason: "no_retry" or "max_redeliveries_exceeded".
	Reason string
	// Type selects by the type of the dead-lettered node (subject_type).
	Type string
	// OlderThan selects letters written at least this long ago by the server's clock.
	OlderThan time.Duration
	// Limit takes at most this many letters, oldest first (0: no limit).
	Limit int
	// All must be set for PurgeDeadLetters to purge with no other field set: a guard
	// against throwing every letter away by mistake.
	All bool
}

// empty reports whether the filter selects every letter.
func (f DeadLetterFilter) empty() bool {
	return f.Queue == "" && f.Group == "" && f.Reason == "" && f.Type == "" && f.OlderThan == 0 && f.Limit == 0
}

// Letter is one dead letter as DeadLetters lists it.
type Letter struct {
	ID        string          `json:"id"`
	Queue     string          `json:"queue,omitempty"`
	Group     string          `json:"group,omitempty"`
	Reason    string          `json:"failure_reason"`
	Attempts  int             `json:"delivery_attempts"`
	CreatedAt time.Time       `json:"created_at"`
	SubjectID string          `json:"subject_id"`
	Type      string          `json:"subject_type"`
	Match     json.RawMessage `json:"original_match,omitempty"`
}

// letterColumns are what DeadLetters reads of each letter, in Letter's order.
var letterColumns = []string{"id", "queue", "group", "failure_reason", "delivery_attempts", "created_at", "subject_id", "subject_type", "original_match"}

// DeadLettersStatement returns the statement DeadLetters runs for f:
// `MATCH d: _DeadLetter WHERE … RETURN … ORDER BY d.created_at, d.id [LIMIT n]`.
func DeadLettersStatement(f DeadLetterFilter) (string, map[string]any, error) {
	m, params, err := f.match()
	if err != nil {
		return "", nil, err
	}
	d := ast.NewIdent("d")
	var cols []ast.Expr
	for _, c := range letterColumns {
		cols = append(cols, ast.Sel(d, c))
	}
	m.Return = ast.Returning(cols...)
	m.OrderBy = []*ast.OrderItem{ast.Asc(ast.Sel(d, "created_at")), ast.Asc(ast.Sel(d, "id"))}
	if f.Limit > 0 {
		m.Limit = ast.Int(int64(f.Limit))
	}
	return printer.String(m), params, nil
}

// RedriveStatement returns the statement RedriveDeadLetters runs for f:
// `MATCH d: _DeadLetter WHERE … REDRIVE d`. With a Limit the letters are named by id
// (ids, listed first): `WHERE d.id IN $ids`.
func RedriveStatement(f DeadLetterFilter, ids []string) (string, map[string]any, error) {
	return f.act(&ast.RedriveStmt{ID: ast.NewIdent("d")}, ids)
}

// PurgeStatement returns the statement PurgeDeadLetters runs for f:
// `MATCH d: _DeadLetter WHERE … KILL d`.
func PurgeStatement(f DeadLetterFilter, ids []string) (string, map[string]any, error) {
	if f.empty() && !f.All {
		return "", nil, invalid("dead letters: purging every letter needs All (a filter selects fewer)")
	}
	return f.act(&ast.KillStmt{Target: ast.NewIdent("d")}, ids)
}

func (f DeadLetterFilter) act(action ast.Stmt, ids []string) (string, map[string]any, error) {
	m, params, err := f.match()
	if err != nil {
		return "", nil, err
	}
	if f.Limit > 0 {
		list := make([]any, len(ids))
		for i, id := range ids {
			list[i] = id
		}
		params["ids"] = list
		m.Where = and(m.Where, ast.Binary(ast.Sel(ast.NewIdent("d"), "id"), token.IN, ast.Param("ids")))
	}
	m.Actions = []ast.Stmt{action}
	return printer.String(m), params, nil
}

// match is `MATCH d: _DeadLetter WHERE …` for f; the values travel as parameters.
func (f DeadLetterFilter) match() (*ast.MatchStmt, map[string]any, error) {
	if f.OlderThan < 0 || f.Limit < 0 {
		return nil, nil, invalid("dead letters: older than %v, limit %d: want zero or more", f.OlderThan, f.Limit)
	}
	d := ast.NewIdent("d")
	params := map[string]any{}
	var where ast.Expr
	for _, c := range []struct{ attr, param, value string }{
		{"queue", "queue", f.Queue}, {"group", "group", f.Group}, {"failure_reason", "reason", f.Reason}, {"subject_type", "type", f.Type},
	} {
		if c.value == "" {
			continue
		}
		params[c.param] = c.value
		where = and(where, ast.Binary(ast.Sel(d, c.attr), token.EQL, ast.Param(c.param)))
	}
	if f.OlderThan > 0 {
		where = and(where, ast.Binary(ast.Sel(d, "created_at"), token.LEQ, ast.Binary(ast.Call("now"), token.SUB, ast.Dur(f.OlderThan))))
	}
	return &ast.MatchStmt{Pattern: ast.Bind("d", "_DeadLetter"), Where: where}, params, nil
}

func and(x, y ast.Expr) ast.Expr {
	if x == nil {
		return y
	}
	return ast.Binary(x, token.AND, y)
}

// DeadLetters lists the dead letters f selects, oldest first.
func (c *Client) DeadLetters(ctx context.Context, f DeadLetterFilter) ([]Letter, error) {
	stmt, params, err := DeadLettersStatement(f)
	if err != nil {
		return nil, err
	}
	resp, err := c.Exec(ctx, stmt, params)
	if err != nil {
		return nil, err
	}
	out := []Letter{}
	for _, row := range resp.Last().Rows {
		if len(row) != len(letterColumns) {
			return nil, herald.Errorf(herald.CodeInternal, "client: dead letters: unexpected row %v", row)
		}
		var l Letter
		l.ID, _ = row[0].(string)
		l.Queue, _ = row[1].(string)
		l.Group, _ = row[2].(string)
		l.Reason, _ = row[3].(string)
		n, _ := row[4].(int64)
		l.Attempts = int(n)
		l.CreatedAt, _ = parseTime(row[5])
		l.SubjectID, _ = row[6].(string)
		l.Type, _ = row[7].(string)
		if s, ok := row[8].(string); ok && json.Valid([]byte(s)) {
			l.Match = json.RawMessage(s)
		}
		out = append(out, l)
	}
	return out, nil
}

// RedriveDeadLetters puts back every dead letter f selects, in one commit: each
// letter's message is spawned again (under its old id when free) for the groups that
// consume its type, and the letter deleted. It returns how many came back. It needs
// the admin grant.
func (c *Client) RedriveDeadLetters(ctx context.Context, f DeadLetterFilter) (int, error) {
	return c.settleLetters(ctx, f, RedriveStatement)
}

// PurgeDeadLetters deletes every dead letter f selects, in one commit; their messages
// are gone for good. A filter that selects every letter needs f.All. It returns how
// many were purged. It needs the admin grant.
func (c *Client) PurgeDeadLetters(ctx context.Context, f DeadLetterFilter) (int, error) {
	return c.settleLetters(ctx, f, PurgeStatement)
}

func (c *Client) settleLetters(ctx context.Context, f DeadLetterFilter, build func(DeadLetterFilter, []string) (string, map[string]any, error)) (int, error) {
	var ids []string
	if f.Limit > 0 {
		// MATCH with an action takes no LIMIT: name the oldest letters by id.
		if _, _, err := build(f, nil); err != nil {
			return 0, err
		}
		letters, err := c.DeadLetters(ctx, f)
		if err != nil {
			return 0, err
		}
		if len(letters) == 0 {
			return 0, nil
		}
		for _, l := range letters {
			ids = append(ids, l.ID)
		}
	}
	stmt, params, err := build(f, ids)
	if err != nil {
		return 0, err
	}
	resp, err := c.Exec(ctx, stmt, params)
	if err != nil {
		return 0, err
	}
	// A bulk REDRIVE answers its count; a KILL counts in the stats.
	r := resp.Last()
	if len(r.Rows) == 1 && len(r.Columns) == 1 && r.Columns[0] == "redriven" {
		n, _ := r.Rows[0][0].(int64)
		return int(n), nil
	}
	return r.Stats.NodesDeleted, nil
}
