package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/herald-mq/herald/store/memstore"
)

// rpcEvent is the Connect JSON form of a herald.v1.Event (64-bit integers are strings).
type rpcEvent struct {
	Type  string         `json:"type"`
	Match map[string]any `json:"match"`
	Prev  map[string]any `json:"prev"`
	Seq   string         `json:"seq"`
}

// openRPCWatch starts herald.v1.Herald/Consume over the Connect protocol (enveloped JSON
// on HTTP/1.1) and returns a reader of its response envelopes.
func openRPCWatch(t *testing.T, ctx context.Context, addr string, req map[string]any) *bufio.Reader {
	t.Helper()
	msg, _ := json.Marshal(req)
	var body bytes.Buffer
	body.WriteByte(0)
	_ = binary.Write(&body, binary.BigEndian, uint32(len(msg)))
	body.Write(msg)
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/herald.v1.Herald/Consume", &body)
	hreq.Header.Set("Content-Type", "application/connect+json")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("Consume: status %d", resp.StatusCode)
	}
	return bufio.NewReader(resp.Body)
}

func nextRPCEvent(t *testing.T, r *bufio.Reader) (rpcEvent, uint64) {
	t.Helper()
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
	if _, err := io.ReadFull(r, data); err != nil {
		t.Fatal(err)
	}
	if hdr[0]&0x02 != 0 {
		t.Fatalf("the stream ended: %s", data)
	}
	var ev rpcEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	seq, _ := strconv.ParseUint(ev.Seq, 10, 64)
	return ev, seq
}

// TestWatchModeOverRPC runs a watch-mode statement through the RPC Consume call of the
// real server: snapshot, added, changed with prev, then a resume after a position.
func TestWatchModeOverRPC(t *testing.T) {
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger()})
	start(t, s)
	addr := s.Addr()
	post(t, addr, `SPAWN #t1: Task { status = "done", title = "a" }; SPAWN #t2: Task { status = "todo", title = "b" }`)

	const stmt = `WATCH t: Task WHERE t.status = $s [delivery: reliable] RETURN t`
	params := map[string]any{"s": "done"}
	ctx, cancel := context.WithCancel(context.Background())
	r := openRPCWatch(t, ctx, addr, map[string]any{"query": stmt, "params": params})
	if ev, _ := nextRPCEvent(t, r); ev.Type != "initial" || ev.Match["id"] != "t1" {
		t.Fatalf("initial: %+v", ev)
	}
	post(t, addr, `MATCH t: Task WHERE t.id = "t2" SET t.status = "done";`)
	if ev, _ := nextRPCEvent(t, r); ev.Type != "added" || ev.Match["id"] != "t2" {
		t.Fatalf("added: %+v", ev)
	}
	post(t, addr, `MATCH t: Task WHERE t.id = "t1" SET t.title = "z";`)
	ev, last := nextRPCEvent(t, r)
	if ev.Type != "changed" || ev.Match["title"] != "z" || ev.Prev["title"] != "a" || last == 0 {
		t.Fatalf("changed: %+v", ev)
	}
	cancel()

	post(t, addr, `KILL #t2`)
	post(t, addr, `SPAWN #t3: Task { status = "done", title = "c" }`)

	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	r2 := openRPCWatch(t, ctx2, addr, map[string]any{"query": stmt, "params": params, "after": strconv.FormatUint(last, 10)})
	want := []struct{ typ, id string }{{"removed", "t2"}, {"added", "t3"}}
	for _, w := range want {
		if ev, seq := nextRPCEvent(t, r2); ev.Type != w.typ || ev.Match["id"] != w.id || seq <= last {
			t.Fatalf("after resume: got %+v, want %s %s", ev, w.typ, w.id)
		}
	}
}
