package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/herald-mq/herald"
)

// The dead-letter page browses _DeadLetter nodes with a filter and acts on one, a
// selection, or every letter the filter matches:
//
//	redrive one or a selection   MATCH d: _DeadLetter WHERE d.id IN $ids REDRIVE d
//	redrive all matching         MATCH d: _DeadLetter WHERE … REDRIVE d
//	purge one or a selection     MATCH d: _DeadLetter WHERE d.id IN $ids KILL d
//	purge all matching           MATCH d: _DeadLetter WHERE … KILL d
//
// Each is one statement and one commit: every letter it selects comes back (or goes),
// or none does. It runs as the principal, so the node's grants decide (both need
// admin).

// maxLetters bounds the letters one page lists.
const maxLetters = 200

// letterFilter selects dead letters: each field that is set is one condition.
type letterFilter struct {
	Reason string // failure_reason
	Type   string // subject_type
	Group  string // the consume group it was delivered to
	Queue  string // the queue its message named
	Watch  string // the _Watch id of the group that dead-lettered it
	Where  string // an expression over d, as the user wrote it
}

func filterOf(form url.Values) letterFilter {
	get := func(k string) string { return strings.TrimSpace(form.Get(k)) }
	return letterFilter{Reason: get("reason"), Type: get("type"), Group: get("group"), Queue: get("queue"),
		Watch: get("watch"), Where: get("where")}
}

// fields are the filter's fields by their form names.
func (f letterFilter) fields() map[string]string {
	return map[string]string{"reason": f.Reason, "type": f.Type, "group": f.Group, "queue": f.Queue, "watch": f.Watch, "where": f.Where}
}

// clause is the filter as a WHERE clause ("" for none) and its parameters.
func (f letterFilter) clause() (string, map[string]herald.Value) {
	var conds []string
	params := map[string]herald.Value{}
	add := func(attr, param, v string) {
		if v != "" {
			conds = append(conds, "d."+attr+" = $"+param)
			params[param] = herald.String(v)
		}
	}
	add("failure_reason", "reason", f.Reason)
	add("subject_type", "type", f.Type)
	add("group", "group", f.Group)
	add("queue", "queue", f.Queue)
	add("watch", "watch", f.Watch)
	if f.Where != "" {
		conds = append(conds, "("+f.Where+")")
	}
	if len(conds) == 0 {
		return "", params
	}
	return " WHERE " + strings.Join(conds, " AND "), params
}

// query is the filter as URL parameters, to come back to the same list after an action.
func (f letterFilter) query() string {
	v := url.Values{}
	for k, s := range f.fields() {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

// letter is one dead letter as the page lists it.
type letter struct {
	ID, Reason, SubjectType, SubjectID, Watch, Match, Group, Queue string
	Attempts                                                       int64
	CreatedAt                                                      string
}

type lettersData struct {
	Filter  letterFilter
	Letters []letter
	Total   int64 // letters the filter matches
	Done    string
}

func (h *Handler) deadLetters(w http.ResponseWriter, r *http.Request) {
	d := lettersData{Filter: filterOf(r.URL.Query()), Done: r.URL.Query().Get("done")}
	var err error
	d.Letters, d.Total, err = h.letters(r.Context(), d.Filter)
	h.render(w, r, http.StatusOK, "deadletters", "Dead letters", d, err)
}

// letters lists the first letters f matches, and counts them all.
func (h *Handler) letters(ctx context.Context, f letterFilter) ([]letter, int64, error) {
	total, err := h.countLetters(ctx, f)
	if err != nil {
		return nil, 0, err
	}
	where, params := f.clause()
	res, _, err := h.exec(ctx, "MATCH d: _DeadLetter"+where+` RETURN d.id, d.failure_reason, d.subject_type, d.subject_id,
 d.delivery_attempts, d.created_at, d.original_match, d.watch, d.group, d.queue LIMIT `+fmt.Sprint(maxLetters), params)
	if err != nil {
		return nil, 0, err
	}
	out := make([]letter, 0, len(res.Rows))
	for _, row := range res.Rows {
		if len(row) < 10 {
			continue
		}
		l := letter{ID: row[0].AsString(), Reason: row[1].AsString(), SubjectType: row[2].AsString(), SubjectID: row[3].AsString(),
			Attempts: row[4].AsInt(), Match: row[6].AsString(), Watch: row[7].AsString(),
			Group: row[8].AsString(), Queue: row[9].AsString()}
		if !row[5].IsNull() {
			l.CreatedAt = row[5].AsTime().Format(time.RFC3339)
		}
		out = append(out, l)
	}
	return out, total, nil
}

// countLetters counts the letters f matches.
func (h *Handler) countLetters(ctx context.Context, f letterFilter) (int64, error) {
	where, params := f.clause()
	res, _, err := h.exec(ctx, "MATCH d: _DeadLetter"+where+" RETURN COUNT(d)", params)
	if err != nil || len(res.Rows) == 0 || len(res.Rows[0]) == 0 {
		return 0, err
	}
	return res.Rows[0][0].AsInt(), nil
}

// idRE is what a node id may be, so that an id can be written into a statement as #id.
var idRE = regexp.MustCompile(`^[A-Za-z0-9_]{1,128}$`)

// actOnDeadLetters redrives or purges the letters a form names ("ids", a selection;
// "act", a row's button: "redrive <id>") or, with scope=all, every letter its filter matches, then lists the
// letters again with what was done.
func (h *Handler) actOnDeadLetters(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, herald.Errorf(herald.CodeMalformedRequest, "the form cannot be read: %v", err))
		return
	}
	f := filterOf(r.PostForm)
	action, ids := r.PostForm.Get("action"), r.PostForm["ids"]
	if act, id, ok := strings.Cut(r.PostForm.Get("act"), " "); ok { // a row's own button
		action, ids = act, []string{id}
	}
	for _, id := range ids {
		if !idRE.MatchString(id) {
			h.fail(w, r, herald.Errorf(herald.CodeMalformedRequest, "%q is not a dead letter's id", id))
			return
		}
	}
	var n int
	var err error
	switch {
	case action != "redrive" && action != "purge":
		err = herald.Errorf(herald.CodeMalformedRequest, "the action must be redrive or purge, not %q", action)
	case r.PostForm.Get("scope") == "all":
		n, err = h.allMatching(r.Context(), action, f)
	case len(ids) == 0:
		err = herald.Errorf(herald.CodeMalformedRequest, "select at least one dead letter")
	default:
		n, err = h.bySelection(r.Context(), action, ids)
	}
	if err != nil {
		d := lettersData{Filter: f}
		d.Letters, d.Total, _ = h.letters(r.Context(), f)
		h.render(w, r, herald.CodeOf(err).Info().HTTP, "deadletters", "Dead letters", d, err)
		return
	}
	done := fmt.Sprintf("%d dead letter", n)
	if n != 1 {
		done += "s"
	}
	done += map[string]string{"redrive": " redriven", "purge": " purged"}[action]
	q := f.query()
	if q != "" {
		q += "&"
	}
	http.Redirect(w, r, Prefix+"/dead-letters?"+q+"done="+url.QueryEscape(done), http.StatusSeeOther)
}

// bySelection redrives or purges the letters ids names.
func (h *Handler) bySelection(ctx context.Context, action string, ids []string) (int, error) {
	list := make([]herald.Value, len(ids))
	for i, id := range ids {
		list[i] = herald.String(id)
	}
	return h.act(ctx, action, " WHERE d.id IN $ids", map[string]herald.Value{"ids": herald.List(list...)})
}

// allMatching redrives or purges every letter the filter matches.
func (h *Handler) allMatching(ctx context.Context, action string, f letterFilter) (int, error) {
	where, params := f.clause()
	return h.act(ctx, action, where, params)
}

// act runs MATCH d: _DeadLetter <where> REDRIVE d (or KILL d) and reports how many
// letters it redrove (its one column, redriven) or purged (the nodes it deleted).
func (h *Handler) act(ctx context.Context, action, where string, params map[string]herald.Value) (int, error) {
	if action == "purge" {
		res, _, err := h.exec(ctx, "MATCH d: _DeadLetter"+where+" KILL d", params)
		return res.Stats.NodesDeleted, err
	}
	res, _, err := h.exec(ctx, "MATCH d: _DeadLetter"+where+" REDRIVE d", params)
	if err != nil || len(res.Rows) == 0 || len(res.Rows[0]) == 0 {
		return 0, err
	}
	return int(res.Rows[0][0].AsInt()), nil
}
