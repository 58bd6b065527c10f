package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/broker"
)

// ErrorBody is the JSON shape of every error answer: {"error": {...}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail describes one error. Line and Column are set only for errors tied to a
// position in the query text.
type ErrorDetail struct {
	Code    herald.Code `json:"code"`
	Name    string      `json:"name"`
	Message string      `json:"message"`
	Line    int         `json:"line,omitempty"`
	Column  int         `json:"column,omitempty"`
	// Leader is where the leader serves clients, on E5006 NOT_LEADER from a follower.
	Leader string `json:"leader,omitempty"`
}

// Status returns the HTTP status of err according to the error table.
func Status(err error) int { return herald.CodeOf(err).Info().HTTP }

// Detail converts err to its JSON description; foreign errors become INTERNAL.
func Detail(err error) ErrorDetail {
	he := herald.AsError(err)
	info := he.Code.Info()
	return ErrorDetail{Code: info.Code, Name: info.Name, Message: he.Message, Line: he.Line, Column: he.Column, Leader: broker.LeaderOf(err)}
}

// writeError answers with err's status and JSON body and records its code for the
// request log and metrics.
//
// A follower's E5006 NOT_LEADER that names the leader answers 307 Temporary Redirect to
// the same request at the leader (clients that follow redirects resend it there, body
// and method unchanged), with the error body besides.
func writeError(w http.ResponseWriter, err error) {
	d := Detail(err)
	status := d.Code.Info().HTTP
	if rec, ok := w.(*recorder); ok {
		rec.code = d.Code
		if d.Leader != "" && rec.uri != "" {
			w.Header().Set("Location", strings.TrimSuffix(d.Leader, "/")+rec.uri)
			status = http.StatusTemporaryRedirect
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ErrorBody{Error: d})
}

// WriteError answers err as the API's error body with its code's HTTP status, for
// handlers outside this package (authentication, the token API).
func WriteError(w http.ResponseWriter, err error) { writeError(w, err) }
