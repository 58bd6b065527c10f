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
//	redrive one or a selection   REDRIVE #id, one statement a letter
//	redrive all matching         MATCH d: _DeadLetter WHERE … REDRIVE d
//	purge a selection            MATCH d: _DeadLetter WHERE d.id IN $ids KILL d
//	purge all matching           MATCH d: _DeadLetter WHERE … KILL d
//
// Each runs as the principal, so the node's grants decide (REDRIVE needs admin).

// maxLetters bounds the letters one page lists.
const maxLetters = 200

// letterFilter selects dead letters: each field that is set is one condition.
type letterFilter struct {
	Reason string // failure_reason
	Type   string // subject_type
	Watch  string // the _Watch id of the group that dead-lettered it
	Where  string // an expression over d, as the user wrote it
}

func filterOf(form url.Values) letterFilter {
	return letterFilter{Reason: strings.TrimSpace(form.Get("reason")), Type: strings.TrimSpace(form.Get("type")),
		Watch: strings.TrimSpace(form.Get("watch")), Where: strings.TrimSpace(form.Get("where"))}
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
	for k, s := range map[string]string{"reason": f.Reason, "type": f.Type, "watch": f.Watch, "where": f.Where} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

// letter is one dead letter as the page lists it.
type letter struct {
	ID, Reason, SubjectType, SubjectID, Watch, Match string
	Attempts                                         int64
	CreatedAt                                        string
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
 d.delivery_attempts, d.created_at, d.original_match, d.watch LIMIT `+fmt.Sprint(maxLetters), params)
	if err != nil {
		return nil, 0, err
	}
	out := make([]letter, 0, len(res.Rows))
	for _, row := range res.Rows {
		if len(row) < 8 {
			continue
		}
		l := letter{ID: row[0].AsString(), Reason: row[1].AsString(), SubjectType: row[2].AsString(), SubjectID: row[3].AsString(),
			Attempts: row[4].AsInt(), Match: row[6].AsString(), Watch: row[7].AsString()}
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
	case action == "redrive":
		n, err = h.redrive(r.Context(), ids)
	default:
		n, err = h.purge(r.Context(), ids)
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

// redrive redrives each letter on its own; it stops at the first refusal.
func (h *Handler) redrive(ctx context.Context, ids []string) (int, error) {
	for i, id := range ids {
		if _, _, err := h.exec(ctx, "REDRIVE #"+id, nil); err != nil {
			return i, err
		}
	}
	return len(ids), nil
}

// purge deletes the selected letters in one statement.
func (h *Handler) purge(ctx context.Context, ids []string) (int, error) {
	list := make([]herald.Value, len(ids))
	for i, id := range ids {
		list[i] = herald.String(id)
	}
	res, _, err := h.exec(ctx, "MATCH d: _DeadLetter WHERE d.id IN $ids KILL d", map[string]herald.Value{"ids": herald.List(list...)})
	return res.Stats.NodesDeleted, err
}

// allMatching redrives or purges every letter the filter matches, in one statement, and
// reports how many letters left the list.
func (h *Handler) allMatching(ctx context.Context, action string, f letterFilter) (int, error) {
	where, params := f.clause()
	verb := "REDRIVE"
	if action == "purge" {
		verb = "KILL"
	}
	before, err := h.countLetters(ctx, f)
	if err != nil {
		return 0, err
	}
	if _, _, err := h.exec(ctx, "MATCH d: _DeadLetter"+where+" "+verb+" d", params); err != nil {
		return 0, err
	}
	after, err := h.countLetters(ctx, f)
	return int(max(before-after, 0)), err
}
