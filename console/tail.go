package console

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
)

// tailPing is how often a quiet tail sends a comment, so proxies keep it open.
const tailPing = 15 * time.Second

// tailPage shows the live tail of a watch pattern; its script reads tailEvents.
func (h *Handler) tailPage(w http.ResponseWriter, r *http.Request) {
	pattern := strings.TrimSpace(r.URL.Query().Get("pattern"))
	h.render(w, r, http.StatusOK, "tail", "Live tail", struct{ Pattern string }{pattern}, nil)
}

// tailEvents opens the pattern as a watch-mode stream through the seam, as the
// principal, and passes its events to the browser as server-sent events (one JSON
// event a message). A refused statement is the stream's one "error" event.
func (h *Handler) tailEvents(w http.ResponseWriter, r *http.Request) {
	pattern := strings.TrimSpace(r.URL.Query().Get("pattern"))
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	rc := http.NewResponseController(w)
	send := func(ev herald.Event) bool {
		b, _ := json.Marshal(ev)
		if _, err := w.Write(append(append([]byte("data: "), b...), '\n', '\n')); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if pattern == "" {
		send(errorEvent(herald.Errorf(herald.CodeEmptyQuery, "give a WATCH statement to tail")))
		return
	}
	st, err := h.b.Open(r.Context(), broker.StreamRequest{Query: pattern, Only: broker.ModeWatch})
	if err != nil {
		send(errorEvent(err))
		return
	}
	defer st.Close()
	if rc.Flush() != nil { // the headers: the browser's EventSource is open from here
		return
	}
	ping := h.clock.NewTimer(tailPing)
	defer ping.Stop()
	for {
		select {
		case ev, ok := <-st.Events():
			if !ok || !send(ev) {
				return
			}
		case <-ping.C():
			if _, err := w.Write([]byte(": ping\n\n")); err != nil || rc.Flush() != nil {
				return
			}
			ping.Reset(tailPing)
		case <-r.Context().Done():
			return
		}
	}
}

func errorEvent(err error) herald.Event {
	he := herald.AsError(err)
	return herald.Event{Type: herald.EventError, Code: he.Code, Message: he.Message}
}
