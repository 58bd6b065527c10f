package console

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
)

// overviewData is the overview page: the node's status and the counts.
type overviewData struct {
	Status      broker.Status
	StatusErr   *errorView
	Seq, Tick   uint64
	Groups      int64
	Streams     int64
	DeadLetters int64
	CountsErr   *errorView
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	var d overviewData
	st, err := h.b.Status(r.Context())
	d.Status, d.StatusErr = st, viewOf(err)
	d.Seq, d.Tick = h.b.Position()
	res, _, err := h.exec(r.Context(), stmtCounts, nil)
	if err == nil && len(res.Rows) > 0 {
		d.Groups, d.Streams = res.Rows[0][0].AsInt(), res.Rows[0][1].AsInt()
		res, _, err = h.exec(r.Context(), stmtLetters, nil)
		if err == nil && len(res.Rows) > 0 {
			d.DeadLetters = res.Rows[0][0].AsInt()
		}
	}
	d.CountsErr = viewOf(err)
	h.render(w, r, http.StatusOK, "overview", "Overview", d, nil)
}

func (h *Handler) queues(w http.ResponseWriter, r *http.Request) {
	gs, err := h.groups(r.Context())
	h.render(w, r, http.StatusOK, "queues", "Queues and consume groups", gs, err)
}

func (h *Handler) streams(w http.ResponseWriter, r *http.Request) {
	ss, head, err := h.streamsOf(r.Context())
	h.render(w, r, http.StatusOK, "streams", "Watch streams", struct {
		Head    uint64
		Streams []stream
	}{head, ss}, err)
}

// stats serves the figures the pages poll, as JSON.
func (h *Handler) stats(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(h.figures(r.Context()))
}

// queryData is the query page: the statement, and its columns, rows and plan.
type queryData struct {
	Query   string
	Ran     bool
	Columns []string
	Rows    [][]herald.Value
	Stats   herald.Stats
	Seq     uint64
}

// queryPage shows the query form and, for a posted statement, its outcome. The
// statement runs as the principal; a WATCH is refused (use the tail).
func (h *Handler) queryPage(w http.ResponseWriter, r *http.Request) {
	d := queryData{Query: "MATCH w: _Watch RETURN w.pattern, w.mode, w.status"}
	if r.Method != http.MethodPost {
		h.render(w, r, http.StatusOK, "query", "Query", d, nil)
		return
	}
	d.Query = strings.TrimSpace(r.PostFormValue("query"))
	if d.Query == "" {
		h.render(w, r, http.StatusOK, "query", "Query", d, herald.Errorf(herald.CodeEmptyQuery, "the query is empty"))
		return
	}
	resp, err := h.b.Exec(r.Context(), "", d.Query, nil)
	if err == nil && len(resp.Results) > 0 {
		last := resp.Results[len(resp.Results)-1]
		d.Ran, d.Columns, d.Rows, d.Stats, d.Seq = true, last.Columns, last.Rows, last.Stats, resp.Seq
	}
	h.render(w, r, http.StatusOK, "query", "Query", d, err)
}
