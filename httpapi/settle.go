package httpapi

import (
	"net/http"
	"strings"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
)

// settleRequest is the body of POST /v1/settle: consume-mode settlements to commit
// together.
type settleRequest struct {
	Settlements []settleItem `json:"settlements"`
}

type settleItem struct {
	DeliveryID string `json:"delivery_id"`
	Action     string `json:"action"` // ack, nack, reject, extend
	Delay      string `json:"delay,omitempty"`
	By         string `json:"by,omitempty"`
}

// settleResponse answers POST /v1/settle: one result per settlement, in order, and the
// position of the commit that carried them.
type settleResponse struct {
	Results []settleResult `json:"results"`
	Seq     uint64         `json:"seq"`
	Tick    uint64         `json:"tick"`
}

type settleResult struct {
	DeliveryID string       `json:"delivery_id"`
	OK         bool         `json:"ok"`
	Deadline   string       `json:"deadline,omitempty"` // extend
	Error      *ErrorDetail `json:"error,omitempty"`
}

var settleActions = map[string]broker.Action{
	"ack": broker.ActAck, "nack": broker.ActNack, "reject": broker.ActReject, "extend": broker.ActExtend,
}

// settle commits a batch of ACK, NACK, NACK [no_retry] and EXTEND settlements in one
// transaction. The request succeeds as a whole (200) when it is well formed; each
// settlement reports its own outcome — E8004 for an unknown, settled or expired id —
// and a failed one changes nothing.
func (h *Handler) settle(w http.ResponseWriter, r *http.Request) {
	var req settleRequest
	if err := h.decode(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := broker.CheckBatch(len(req.Settlements)); err != nil {
		writeError(w, err)
		return
	}
	items := make([]broker.Settle, len(req.Settlements))
	for i, it := range req.Settlements {
		act, ok := settleActions[strings.ToLower(it.Action)]
		if !ok {
			writeError(w, herald.Errorf(herald.CodeMalformedRequest, "settlement %d: action %q; want ack, nack, reject or extend", i, it.Action))
			return
		}
		d, err := settleDuration(i, "delay", it.Delay)
		if err != nil {
			writeError(w, err)
			return
		}
		by, err := settleDuration(i, "by", it.By)
		if err != nil {
			writeError(w, err)
			return
		}
		items[i] = broker.Settle{DeliveryID: it.DeliveryID, Action: act, Delay: d, By: by}
		if err := broker.CheckSettle(i, items[i], it.Delay != "", it.By != ""); err != nil {
			writeError(w, err)
			return
		}
	}
	results, seq, tick := h.b.Settle(r.Context(), items)
	if seq == 0 {
		seq, tick = h.b.Position()
	}
	out := settleResponse{Results: make([]settleResult, len(results)), Seq: seq, Tick: tick}
	for i, res := range results {
		sr := settleResult{DeliveryID: items[i].DeliveryID, OK: res.Err == nil}
		if res.Err != nil {
			d := Detail(res.Err)
			sr.Error = &d
		}
		if items[i].Action == broker.ActExtend && res.Err == nil {
			sr.Deadline = res.Deadline.UTC().Format(time.RFC3339Nano)
		}
		out.Results[i] = sr
	}
	writeJSON(w, http.StatusOK, out)
}

// settleDuration parses an optional duration field ("250ms", "30s", "5m") of the
// settlement at index i.
func settleDuration(i int, field, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, herald.Errorf(herald.CodeMalformedRequest, "settlement %d: %s %q is not a duration such as \"5s\"", i, field, v)
	}
	return d, nil
}
