package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/heraldtest"
)

// A []byte published is a Bytes attribute, and comes back as a []byte equal to it: to a
// consumer, in query rows and as a parameter — whether the client sent the attributes
// as a map of wire values (the first frame) or in the binary encoding (after the
// server's header), and whether the value stays in memory or goes to a body.
func TestBytesRoundTripThroughTheServer(t *testing.T) {
	srv := heraldtest.NewServer(t)
	srv.Exec(`node Msg { body: Bytes [required], n: Int }`, nil)
	ctx := context.Background()
	c := srv.Client()
	bodies := [][]byte{
		[]byte("hello"),
		{0xff, 0x00, 0xfe},                   // not UTF-8: no String could carry it
		bytes.Repeat([]byte{0x80, 'x'}, 300), // past InlineLimit: lives in a body
		{},
	}
	for i, b := range bodies {
		if _, err := c.Publish(ctx, "Msg", map[string]any{"body": b, "n": i}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if _, err := c.Publish(ctx, "Msg", map[string]any{"body": "hello", "n": 9}); err == nil {
		t.Fatal("a string was accepted for a Bytes attribute")
	}

	got := make(chan map[string]any, len(bodies))
	sub := mustSubscribe(t, c, `WATCH m: Msg [mode: consume] RETURN m`, func(ctx context.Context, m *client.Message) error {
		got <- m.Match
		return nil
	})
	for range bodies {
		m := recvT(t, got)
		b, ok := m["body"].([]byte)
		if n := m["n"].(int64); !ok || !bytes.Equal(b, bodies[n]) {
			t.Fatalf("message %v: body %#v (%T), want %x", m["n"], m["body"], m["body"], bodies[n])
		}
	}

	// Consumed and acknowledged; with the subscription gone, publish again and read by
	// query with a []byte parameter.
	if err := sub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, "Msg", map[string]any{"body": bodies[1], "n": 1}); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Exec(ctx, `MATCH m: Msg WHERE m.body = $b RETURN m.body, length(m.body)`, map[string]any{"b": bodies[1]})
	if err != nil {
		t.Fatal(err)
	}
	if rows := resp.Last().Rows; len(rows) != 1 || !bytes.Equal(rows[0][0].([]byte), bodies[1]) || rows[0][1] != int64(3) {
		t.Fatalf("rows %#v", rows)
	}
}

// The JSON API writes a Bytes value as {"$bytes": "<base64>"} and reads that form as a
// parameter: the request and the answer below are the ones docs/api.md shows.
func TestBytesOverHTTPAsDocumented(t *testing.T) {
	srv := heraldtest.NewServer(t)
	const request = `{"query": "node Msg { body: Bytes }; SPAWN #m1: Msg { body = $body }; MATCH m: Msg RETURN m.body, string(m.body), m", "params": {"body": {"$bytes": "aGVsbG8="}}}`
	const answerRows = `{"columns":["m.body","string(m.body)","m"],"rows":[[{"$bytes":"aGVsbG8="},"hello",{"id":"m1","_type":"Msg","body":{"$bytes":"aGVsbG8="}}]],"stats":{"rows_scanned":1,"plan":"scan Msg"}}`
	doc, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{request, answerRows} {
		if !strings.Contains(string(doc), s) {
			t.Errorf("docs/api.md does not show %s", s)
		}
	}
	resp, err := http.Post(srv.URL()+"/v1/query", "application/json", strings.NewReader(request))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), answerRows) {
		t.Fatalf("status %d, answer %s; want rows %s", resp.StatusCode, body, answerRows)
	}
}

// The example of docs/language.md runs as it says.
func TestBytesInTheLanguageAsDocumented(t *testing.T) {
	lines := []string{
		`node Msg { payload: Bytes [required] }`,
		`SPAWN #m1: Msg { payload = bytes("hello") }`,
		`MATCH m: Msg WHERE m.payload = bytes("hello") RETURN m.payload, length(m.payload), string(m.payload)`,
		`-- 0x68656c6c6f | 5 | "hello"`,
		`SPAWN #m2: Msg { payload = "hello" }`,
		`-- E2001 TYPE_MISMATCH: Msg.payload is Bytes, got String "hello"`,
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "language.md"))
	if err != nil {
		t.Fatal(err)
	}
	if block := strings.Join(lines, "\n"); !strings.Contains(string(doc), "```\n"+block+"\n```") {
		t.Fatalf("docs/language.md does not show\n%s", block)
	}
	srv := heraldtest.NewServer(t)
	c := srv.Client()
	ctx := context.Background()
	resp, err := c.Exec(ctx, strings.Join(lines[:3], "\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	rows := resp.Last().Rows
	if len(rows) != 1 {
		t.Fatalf("rows %v", rows)
	}
	cells := make([]string, len(rows[0]))
	for i, x := range rows[0] {
		v, err := herald.ValueOf(x)
		if err != nil {
			t.Fatal(err)
		}
		cells[i] = v.String()
	}
	if got := "-- " + strings.Join(cells, " | "); got != lines[3] {
		t.Errorf("got %s, want %s", got, lines[3])
	}
	_, err = c.Exec(ctx, lines[4], nil)
	var he *herald.Error
	if !errors.As(err, &he) || "-- "+string(he.Code)+" "+he.Code.Name()+": "+he.Message != lines[5] {
		t.Errorf("got %v, want %s", err, lines[5])
	}
}

// A []byte is published as Bytes and read back as a []byte: a JSON or protobuf payload
// needs no conversion to text.
func ExampleClient_Publish_bytes() {
	ctx := context.Background()
	srv, err := heraldtest.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c, err := client.Dial(ctx, srv.URL())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if _, err := c.Exec(ctx, `node Event { payload: Bytes [required] }`, nil); err != nil {
		log.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]int{"n": 1})
	if _, err := c.Publish(ctx, "Event", map[string]any{"payload": payload}); err != nil {
		log.Fatal(err)
	}
	resp, err := c.Exec(ctx, `MATCH e: Event RETURN e.payload, length(e.payload)`, nil)
	if err != nil {
		log.Fatal(err)
	}
	row := resp.Last().Rows[0]
	fmt.Printf("%T %s %d\n", row[0], row[0], row[1])
	// Output:
	// []uint8 {"n":1} 7
}
