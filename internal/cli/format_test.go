package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/client"
)

func decodeResponse(t *testing.T, s string) *queryResponse {
	t.Helper()
	var r queryResponse
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func TestFormatResponse(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{
			name: "acceptance row",
			body: `{"results":[{"columns":["j.status","j.priority"],"rows":[["pending",5]],"stats":{"rows_scanned":1,"plan":"index Job.priority"}}],"seq":2,"tick":2}`,
			want: "" +
				" j.status | j.priority\n" +
				"----------+------------\n" +
				" pending  |          5\n" +
				"(1 row; rows scanned: 1, plan: index Job.priority)\n" +
				"seq 2, tick 2\n",
		},
		{
			name: "writes and a table",
			body: `{"results":[` +
				`{"columns":[],"rows":[],"stats":{"types_declared":1,"rows_scanned":0}},` +
				`{"columns":[],"rows":[],"stats":{"rows_scanned":0}},` +
				`{"columns":["name","n","tags"],"rows":[["ada",1,["x","y"]],["grace hopper",null,[]],["line\nbreak",-20,null]],"stats":{"rows_scanned":3}}` +
				`],"seq":9,"tick":4}`,
			want: "" +
				"OK (types declared: 1)\n" +
				"\n" +
				"OK\n" +
				"\n" +
				" name         | n    | tags\n" +
				"--------------+------+-----------\n" +
				" ada          |    1 | [\"x\",\"y\"]\n" +
				" grace hopper | null | []\n" +
				" line\\nbreak  |  -20 | null\n" +
				"(3 rows; rows scanned: 3)\n" +
				"seq 9, tick 4\n",
		},
		{
			name: "empty result",
			body: `{"results":[{"columns":["x"],"rows":[],"stats":{"rows_scanned":0}}],"seq":0,"tick":0}`,
			want: "" +
				" x\n" +
				"---\n" +
				"(0 rows)\n" +
				"seq 0, tick 0\n",
		},
		{
			name: "bytes",
			body: `{"results":[{"columns":["m.body","m","x"],"rows":[[{"$bytes":"aGVsbG8="},{"id":"m1","body":{"$bytes":"AP8="}},{"$bytes":"!"}],[{"$bytes":""},null,{"a":1}]]}],"seq":1,"tick":1}`,
			want: "" +
				" m.body       | m                                    | x\n" +
				"--------------+--------------------------------------+----------------\n" +
				" 0x68656c6c6f | {\"id\":\"m1\",\"body\":{\"$bytes\":\"AP8=\"}} | {\"$bytes\":\"!\"}\n" +
				" 0x           | null                                 | {\"a\":1}\n" +
				"(2 rows)\n" +
				"seq 1, tick 1\n",
		},
		{
			name: "wide runes",
			body: `{"results":[{"columns":["città","b"],"rows":[["żółw",true]]}],"seq":1,"tick":1}`,
			want: "" +
				" città | b\n" +
				"-------+------\n" +
				" żółw  | true\n" +
				"(1 row)\n" +
				"seq 1, tick 1\n",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := formatResponse(decodeResponse(t, c.body))
			if got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

func TestFormatError(t *testing.T) {
	cases := []struct {
		name, query string
		err         herald.Error
		want        string
	}{
		{
			name:  "caret under column",
			query: "MATCH [",
			err:   herald.Error{Code: "E1001", Message: "expected identifier, found '['", Line: 1, Column: 7},
			want: "" +
				"ERROR E1001 SYNTAX_ERROR at 1:7: expected identifier, found '['\n" +
				" 1 | MATCH [\n" +
				"   |       ^\n",
		},
		{
			name:  "second line with a tab and multi-byte text",
			query: "node Job { status: String }\n\tSPAWN é: Job { = 1 };",
			err:   herald.Error{Code: "E1001", Message: "expected attribute name", Line: 2, Column: 17},
			want: "" +
				"ERROR E1001 SYNTAX_ERROR at 2:17: expected attribute name\n" +
				" 2 | \tSPAWN é: Job { = 1 };\n" +
				"   | \t              ^\n",
		},
		{
			name:  "column past the end points after the text",
			query: "MATCH j: Job RETURN\r\n",
			err:   herald.Error{Code: "E1001", Message: "unexpected end", Line: 1, Column: 99},
			want: "" +
				"ERROR E1001 SYNTAX_ERROR at 1:99: unexpected end\n" +
				" 1 | MATCH j: Job RETURN\n" +
				"   |                    ^\n",
		},
		{
			name:  "double-digit line number",
			query: "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nKILL",
			err:   herald.Error{Code: "E1001", Message: "expected a node reference", Line: 11, Column: 5},
			want: "" +
				"ERROR E1001 SYNTAX_ERROR at 11:5: expected a node reference\n" +
				" 11 | KILL\n" +
				"    |     ^\n",
		},
		{
			name:  "no position",
			query: "SPAWN j: Job { priority = \"x\" }",
			err:   herald.Error{Code: "E2001", Message: "priority is Int"},
			want:  "ERROR E2001 TYPE_MISMATCH: priority is Int\n",
		},
		{
			name:  "line outside the query",
			query: "x",
			err:   herald.Error{Code: "E1001", Message: "m", Line: 3, Column: 1},
			want:  "ERROR E1001 SYNTAX_ERROR at 3:1: m\n",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := formatError(c.query, &c.err); got != c.want {
				t.Errorf("got\n%q\nwant\n%q", got, c.want)
			}
		})
	}
}

func TestComplete(t *testing.T) {
	cases := []struct {
		text string
		want bool
	}{
		{"", false},
		{"MATCH j: Job RETURN j", false},
		{"MATCH j: Job RETURN j;", true},
		{"MATCH j: Job RETURN j;  \n", true},
		{"MATCH j: Job RETURN j; -- done", true},
		{"SPAWN m: Msg { body = \"a;\" }", false},
		{"SPAWN m: Msg { body = \"a;", false},
		{"SPAWN m: Msg { body = \"say \\\";\" }", false},
		{"SPAWN m: Msg { body = \"x\" };", true},
		{"-- comment;", false},
		{"BEGIN; SPAWN a: A {}", false},
		{"BEGIN;\nSPAWN a: A {};\nCOMMIT;", true},
	}
	for _, c := range cases {
		if got := complete(c.text); got != c.want {
			t.Errorf("complete(%q) = %v, want %v", c.text, got, c.want)
		}
	}
}

// The watch and consume commands write a Bytes value ([]byte in a match the client hands
// out) in the JSON API's form, not as a bare base64 string.
func TestBytesInEventLines(t *testing.T) {
	match := map[string]any{"body": []byte("hello"), "l": []any{[]byte{0xff}}, "n": int64(1)}
	ev := client.Event{Type: "added", Seq: 3, Tick: 3, Match: match}
	if got, want := formatEvent(ev), `added seq=3 tick=3 {"body":{"$bytes":"aGVsbG8="},"l":[{"$bytes":"/w=="}],"n":1}`; got != want {
		t.Errorf("formatEvent = %s\nwant %s", got, want)
	}
	if got := eventJSON(ev); !strings.Contains(got, `"match":{"body":{"$bytes":"aGVsbG8="},"l":[{"$bytes":"/w=="}],"n":1}`) {
		t.Errorf("eventJSON = %s", got)
	}
	m := &client.Message{Match: match, DeliveryID: "d1", Attempt: 1, Seq: 3, Tick: 3}
	if got, want := formatDelivery(m, "ack"), `attempt=1 seq=3 {"body":{"$bytes":"aGVsbG8="},"l":[{"$bytes":"/w=="}],"n":1} ack`; got != want {
		t.Errorf("formatDelivery = %s\nwant %s", got, want)
	}
	if got := deliveryJSON(m, "ack"); !strings.Contains(got, `"match":{"body":{"$bytes":"aGVsbG8="},`) {
		t.Errorf("deliveryJSON = %s", got)
	}
	if _, ok := match["body"].([]byte); !ok {
		t.Error("the match itself was changed")
	}
}
