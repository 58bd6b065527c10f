package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
)

// queueRoutes registers the queue REST API (broker.LockQueues).
func (h *Handler) queueRoutes() {
	qh := &queueHandler{h: h, q: h.b}
	h.handle("/queue/{queue_id}/push", "queue_push", qh.push, http.MethodPost)
	h.handle("/queue/{queue_id}/pop", "queue_pop", qh.pop, http.MethodPost)
	h.handle("/queue/{queue_id}/acknowledge", "queue_acknowledge", qh.acknowledge, http.MethodPost)
	h.handle("/queue/{queue_id}/release", "queue_release", qh.release, http.MethodPost)
}

type queueHandler struct {
	h *Handler
	q broker.LockQueues
}

// The answers of the queue contract. Refusals of the contract carry success=false and a
// message (423 carries lock_expires_at instead); server faults use the error table.
type (
	queueStatus struct {
		Success           bool   `json:"success"`
		Message           string `json:"message"`
		ErrorCode         string `json:"error_code,omitempty"`
		ItemsAcknowledged *int   `json:"items_acknowledged,omitempty"`
		ItemsReturned     int    `json:"items_returned,omitempty"`
		ItemsReleased     *int   `json:"items_released,omitempty"`
		ID                string `json:"id,omitempty"`
		Priority          *int64 `json:"priority,omitempty"`
	}
	popAnswer struct {
		Items         []json.RawMessage `json:"items"`
		Count         int               `json:"count"`
		Locked        *bool             `json:"locked,omitempty"`
		LockID        string            `json:"lock_id,omitempty"`
		LockExpiresAt *float64          `json:"lock_expires_at,omitempty"`
	}
	lockedAnswer struct {
		Message       string  `json:"message"`
		LockExpiresAt float64 `json:"lock_expires_at"`
	}
)

// unixSeconds is t as seconds since the Unix epoch, with a fraction.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// fail answers a queue error: the contract's refusals (by their codes) with its status
// and body, anything else through the error table. The seed contract names an expired
// lock LOCK_EXPIRED in error_code; the other refusals carry their code.
func (qh *queueHandler) fail(w http.ResponseWriter, err error) {
	he := herald.AsError(err)
	switch he.Code {
	case herald.CodeQueueLocked:
		var held *broker.LockHeld
		if errors.As(err, &held) {
			writeJSON(w, http.StatusLocked, lockedAnswer{Message: he.Message, LockExpiresAt: unixSeconds(held.ExpiresAt)})
			return
		}
	case herald.CodeNotFound:
		writeJSON(w, http.StatusNotFound, queueStatus{Message: he.Message, ErrorCode: string(he.Code)})
		return
	case herald.CodeLockExpired:
		writeJSON(w, http.StatusGone, queueStatus{Message: he.Message, ErrorCode: he.Code.Name()})
		return
	case herald.CodeMalformedRequest:
		writeJSON(w, http.StatusBadRequest, queueStatus{Message: he.Message, ErrorCode: string(he.Code)})
		return
	}
	writeError(w, err)
}

func badRequest(w http.ResponseWriter, format string, args ...any) {
	writeJSON(w, http.StatusBadRequest, queueStatus{Message: fmt.Sprintf(format, args...), ErrorCode: string(herald.CodeMalformedRequest)})
}

// readObject reads the body as one JSON object of raw fields (unknown fields are
// tolerated). It answers itself and returns false when the body is unusable.
func (qh *queueHandler) readObject(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, qh.h.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, herald.Errorf(herald.CodeBodyTooLarge, "request body exceeds %d bytes", tooLarge.Limit))
		} else {
			badRequest(w, "reading the body: %v", err)
		}
		return nil, false
	}
	var obj map[string]json.RawMessage
	if !utf8.Valid(body) {
		badRequest(w, "the body is not valid UTF-8")
		return nil, false
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		badRequest(w, "the body is empty; expected a JSON object")
		return nil, false
	}
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		badRequest(w, "the body is not a JSON object")
		return nil, false
	}
	return obj, true
}

// push: POST /queue/{queue_id}/push with {"item": <json>, "priority": n}.
func (qh *queueHandler) push(w http.ResponseWriter, r *http.Request) {
	obj, ok := qh.readObject(w, r)
	if !ok {
		return
	}
	var priority int64
	if raw, ok := obj["priority"]; ok && string(raw) != "null" {
		var n json.Number
		// json.Number takes a quoted number too; a priority is a JSON number.
		if err := json.Unmarshal(raw, &n); err != nil || raw[0] == '"' {
			badRequest(w, "priority must be a whole number, 0 or more")
			return
		}
		p, err := n.Int64()
		if err != nil {
			badRequest(w, "priority must be a whole number, 0 or more")
			return
		}
		priority = p
	}
	res, err := qh.q.Push(r.Context(), r.PathValue("queue_id"), obj["item"], priority)
	if err != nil {
		qh.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, queueStatus{Success: true, Message: "item added to the queue", ID: string(res.ID), Priority: &res.Priority})
}

// pop: POST /queue/{queue_id}/pop[?require_ack=true&ttl_seconds=N&count=N].
func (qh *queueHandler) pop(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var o broker.PopOptions
	if v := q.Get("require_ack"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			badRequest(w, "require_ack must be true or false, not %q", v)
			return
		}
		o.RequireAck = b
	}
	if v := q.Get("ttl_seconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			badRequest(w, "ttl_seconds must be a whole number of seconds, not %q", v)
			return
		}
		// Clamped to 1–300 s by the queue service; avoid overflowing the duration.
		n = min(max(n, 1), int64(broker.MaxLockTTL/time.Second))
		o.TTL = time.Duration(n) * time.Second
	}
	if v := q.Get("count"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			badRequest(w, "count must be a whole number, not %q", v)
			return
		}
		o.Count = broker.ClampCount(max(n, 1))
	}
	res, err := qh.q.Pop(r.Context(), r.PathValue("queue_id"), o)
	if err != nil {
		qh.fail(w, err)
		return
	}
	ans := popAnswer{Items: res.Items, Count: len(res.Items)}
	if ans.Items == nil {
		ans.Items = []json.RawMessage{}
	}
	if o.RequireAck {
		ans.Locked = &res.Locked
		if res.Locked {
			ans.LockID = res.LockID
			at := unixSeconds(res.LockExpiresAt)
			ans.LockExpiresAt = &at
		}
	}
	writeJSON(w, http.StatusOK, ans)
}

// lockID reads the {"lock_id": "..."} body of acknowledge and release.
func (qh *queueHandler) lockID(w http.ResponseWriter, r *http.Request) (string, bool) {
	obj, ok := qh.readObject(w, r)
	if !ok {
		return "", false
	}
	var lockID string
	if raw, ok := obj["lock_id"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &lockID); err != nil {
			badRequest(w, "lock_id must be a string")
			return "", false
		}
	}
	return lockID, true
}

// release: POST /queue/{queue_id}/release with {"lock_id": "..."}: the lock's items go
// back to the queue at their place, and the lock is removed.
func (qh *queueHandler) release(w http.ResponseWriter, r *http.Request) {
	lockID, ok := qh.lockID(w, r)
	if !ok {
		return
	}
	n, err := qh.q.Release(r.Context(), r.PathValue("queue_id"), lockID)
	if err != nil {
		qh.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, queueStatus{Success: true, Message: fmt.Sprintf("released %d item(s); they are back in the queue at their place", n), ItemsReleased: &n})
}

// acknowledge: POST /queue/{queue_id}/acknowledge with {"lock_id": "..."}.
func (qh *queueHandler) acknowledge(w http.ResponseWriter, r *http.Request) {
	lockID, ok := qh.lockID(w, r)
	if !ok {
		return
	}
	res, err := qh.q.Acknowledge(r.Context(), r.PathValue("queue_id"), lockID)
	if err != nil {
		qh.fail(w, err)
		return
	}
	n := res.Acknowledged
	msg := fmt.Sprintf("acknowledged %d item(s); they are removed from the queue", n)
	if res.Returned > 0 {
		msg = fmt.Sprintf("acknowledged %d item(s); %d item(s) reached the end of the lock first and are back in the queue", n, res.Returned)
	}
	writeJSON(w, http.StatusOK, queueStatus{Success: true, Message: msg, ItemsAcknowledged: &n, ItemsReturned: res.Returned})
}
