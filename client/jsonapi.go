package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/herald-mq/herald"
)

// The client's few calls of the server's HTTP/JSON API: the JSON form of a query's
// answer (ExecJSON), the queue REST API (queue.go) and the administration of principals
// and tokens (admin.go), which have no RPC. They go over the client's one HTTP client,
// with its TLS settings, bearer token and request timeout.

// maxJSONAnswer bounds the body of an answer of the JSON API, as the RPC transport
// bounds a message.
const maxJSONAnswer = 64 << 20

// jsonCall makes one call of the JSON API: body, when not nil, goes as JSON; the
// answer's status and body come back.
func (c *Client) jsonCall(ctx context.Context, method, path string, body any) (int, []byte, error) {
	if c.isClosed() {
		return 0, nil, ErrClosed
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, invalid("%s %s: %v", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.tr.ep().base+path, rd)
	if err != nil {
		return 0, nil, invalid("%s %s: %v", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.tr.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer drain(resp.Body)
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONAnswer))
	return resp.StatusCode, data, err
}

// answerError is the *herald.Error of a refused call: the one its {"error": {…}} body
// carries, or, for an answer that is not one of Herald's, INTERNAL with the status and
// the start of the body.
func answerError(status int, data []byte) *herald.Error {
	var body struct {
		Error *struct {
			Code    herald.Code `json:"code"`
			Message string      `json:"message"`
			Line    int         `json:"line"`
			Column  int         `json:"column"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error != nil && body.Error.Code != "" {
		e := body.Error
		return &herald.Error{Code: e.Code, Message: e.Message, Line: e.Line, Column: e.Column}
	}
	text := strings.TrimSpace(string(data[:min(len(data), 512)]))
	return herald.Errorf(herald.CodeInternal, "HTTP %d %s: %s", status, http.StatusText(status), text)
}

// ExecJSON runs query as Exec does, through the JSON API (POST /v1/query), and returns
// the answer as the server wrote it: values in their JSON form (docs/api.md), a node's
// attributes in the server's order, every statistic the server counts. It is for
// programs that pass the answer on as JSON, such as `herald query --json`; Exec is the
// faster call for everything else. Parameters travel in their JSON form too, where a
// time.Time or a time.Duration arrives as a string. A refusal is the server's
// *herald.Error.
func (c *Client) ExecJSON(ctx context.Context, query string, params map[string]any) (json.RawMessage, error) {
	return c.execJSON(ctx, "", query, params)
}

// ExecJSON runs query within the session (see Client.ExecJSON).
func (s *Session) ExecJSON(ctx context.Context, query string, params map[string]any) (json.RawMessage, error) {
	return s.c.execJSON(ctx, s.id, query, params)
}

func (c *Client) execJSON(ctx context.Context, session, query string, params map[string]any) (json.RawMessage, error) {
	req := struct {
		Query   string                     `json:"query"`
		Params  map[string]json.RawMessage `json:"params,omitempty"`
		Session string                     `json:"session,omitempty"`
	}{Query: query, Session: session}
	for name, x := range params {
		v, err := herald.ValueOf(x)
		if err != nil {
			return nil, &herald.Error{Code: herald.CodeInvalidArgument, Message: fmt.Sprintf("client: parameter $%s: %v", name, err), Err: err}
		}
		raw, err := v.MarshalJSON()
		if err != nil {
			return nil, &herald.Error{Code: herald.CodeInvalidArgument, Message: fmt.Sprintf("client: parameter $%s: %v", name, err), Err: err}
		}
		if req.Params == nil {
			req.Params = make(map[string]json.RawMessage, len(params))
		}
		req.Params[name] = raw
	}
	status, data, err := c.jsonCall(ctx, http.MethodPost, "/v1/query", req)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, answerError(status, data)
	}
	return bytes.TrimRight(data, "\n"), nil
}
