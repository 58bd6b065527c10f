package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/store/memstore"
)

// readSSE reads one server-sent event block and returns its event type and data.
func readSSE(t *testing.T, r *bufio.Reader) (typ, data string) {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && typ != "":
			return typ, data
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// consumeOne opens a consume watch over SSE and returns the delivery id of its first
// delivery; the stream stays open (holding the lease) until the test ends.
func consumeOne(t *testing.T, addr, watch string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/v1/watch?"+
		url.Values{"query": {watch}}.Encode(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	_, data := readSSE(t, bufio.NewReader(resp.Body))
	var ev struct {
		DeliveryID string `json:"delivery_id"`
	}
	if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.DeliveryID == "" {
		t.Fatalf("consumed event %s: %v", data, err)
	}
	return ev.DeliveryID
}

// TestWatchStreamAndAck runs the basic consume workflow through the server: a job is
// streamed over /v1/watch, acknowledged over /v1/query, and a second ACK answers E8004.
func TestWatchStreamAndAck(t *testing.T) {
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger()})
	start(t, s)
	addr := s.Addr()
	if code, body := post(t, addr, `SPAWN j: Job { status = "pending", n = 1 }`); code != 200 {
		t.Fatalf("spawn: %d %v", code, body)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := url.Values{"query": {`WATCH j: Job WHERE j.status = "pending" [mode: consume] RETURN j`}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/watch?"+q.Encode(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("watch: status %d", resp.StatusCode)
	}
	typ, data := readSSE(t, bufio.NewReader(resp.Body))
	var ev struct {
		Type       string         `json:"type"`
		Match      map[string]any `json:"match"`
		DeliveryID string         `json:"delivery_id"`
		Attempt    int            `json:"attempt"`
	}
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	if typ != "consumed" || ev.Type != "consumed" || ev.DeliveryID == "" || ev.Attempt != 1 || ev.Match["status"] != "pending" {
		t.Fatalf("event %s %s", typ, data)
	}

	ack := `ACK "` + ev.DeliveryID + `"`
	if code, body := post(t, addr, ack); code != 200 {
		t.Fatalf("ack: %d %v", code, body)
	}
	code, body := post(t, addr, ack)
	if code != 404 || body["error"].(map[string]any)["code"] != "E8004" {
		t.Fatalf("second ack: %d %v", code, body)
	}
	code, body = post(t, addr, `MATCH j: Job RETURN COUNT(j)`)
	if rows, _ := json.Marshal(body["results"].([]any)[0].(map[string]any)["rows"]); code != 200 || string(rows) != `[[0]]` {
		t.Fatalf("after ack: %d %v", code, body)
	}
}

// TestRPCOnTheSamePort calls the Connect service with plain HTTP and JSON, as the
// Connect protocol allows, on the JSON API's port.
func TestRPCOnTheSamePort(t *testing.T) {
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger()})
	start(t, s)
	call := func(method, body string) (int, http.Header, map[string]any) {
		t.Helper()
		resp, err := http.Post("http://"+s.Addr()+"/herald.v1.Herald/"+method, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, out
	}
	code, _, out := call("Query", `{"query": "SPAWN t: Thing { n = $n } RETURNING t.n", "params": {"n": 4}}`)
	if code != 200 {
		t.Fatalf("Query: %d %v", code, out)
	}
	rows, _ := json.Marshal(out["results"].([]any)[0].(map[string]any)["rows"])
	if string(rows) != `[[4]]` {
		t.Fatalf("rows %s in %v", rows, out)
	}
	code, hdr, out := call("Ack", `{"deliveryId": "nope"}`)
	if code != 404 || out["code"] != "not_found" || hdr.Get("Herald-Code") != "E8004" {
		t.Fatalf("Ack of an unknown id: %d %v %v", code, hdr, out)
	}
}

// TestWatchPolicyOverHTTP: a WATCH the server's policy denies answers 403 E8001 in both
// modes, and so does consume mode on a system type.
func TestWatchPolicyOverHTTP(t *testing.T) {
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger(),
		WatchPolicy: herald.WatchPolicy{DenyTypes: []string{"Secret"}}})
	start(t, s)
	for _, stmt := range []string{
		`WATCH s: Secret RETURN s`,
		`WATCH s: Secret [mode: consume] RETURN s`,
		`WATCH w: _Watch [mode: consume] RETURN w`,
	} {
		q := url.Values{"query": {stmt}}
		resp, err := http.Get("http://" + s.Addr() + "/v1/watch?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code, Name string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || body.Error.Code != "E8001" || body.Error.Name != "WATCH_PATTERN_DENIED" {
			t.Errorf("%s: status %d %+v, want 403 E8001", stmt, resp.StatusCode, body.Error)
		}
	}
}

// TestSettleOverHTTP: POST /v1/settle against the real consume engine: the first ACK of
// a delivery settles it, a second in the same batch is E8004, and the job is gone.
func TestSettleOverHTTP(t *testing.T) {
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger()})
	start(t, s)
	addr := s.Addr()
	post(t, addr, `SPAWN j: Job {}`)
	did := consumeOne(t, addr, `WATCH j: Job [mode: consume] RETURN j`)
	body := `{"settlements": [{"delivery_id": "` + did + `", "action": "ack"}, {"delivery_id": "` + did + `", "action": "ack"}]}`
	sr, err := http.Post("http://"+addr+"/v1/settle", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Body.Close()
	var out struct {
		Results []struct {
			OK    bool `json:"ok"`
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		} `json:"results"`
		Seq uint64 `json:"seq"`
	}
	if err := json.NewDecoder(sr.Body).Decode(&out); err != nil || sr.StatusCode != 200 {
		t.Fatalf("settle: status %d, %v", sr.StatusCode, err)
	}
	if len(out.Results) != 2 || !out.Results[0].OK || out.Results[1].OK || out.Results[1].Error == nil || out.Results[1].Error.Code != "E8004" || out.Seq == 0 {
		t.Fatalf("settle answer %+v", out)
	}
	_, count := post(t, addr, `MATCH j: Job RETURN COUNT(j)`)
	if rows, _ := json.Marshal(count["results"].([]any)[0].(map[string]any)["rows"]); string(rows) != `[[0]]` {
		t.Fatalf("jobs left: %s", rows)
	}
}
