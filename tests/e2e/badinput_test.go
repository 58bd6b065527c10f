package e2e

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestBadInputIsRefused: input the server cannot take exactly is refused with a code,
// never reshaped and answered 200: an Int result past 64 bits, a JSON integer past 64
// bits, and a body that is not UTF-8. Nothing is written.
func TestBadInputIsRefused(t *testing.T) {
	s := startServer(t, t.TempDir())
	u := s.URL()
	post := func(body []byte) (int, string) {
		resp, err := httpClient.Post(u+"/v1/query", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		what   string
		body   string
		status int
		code   string
	}{
		{"Int overflow", `{"query": "SPAWN n: Num { v = 9223372036854775807 + 1 }"}`, 400, "E2008"},
		{"negative Int overflow", `{"query": "SPAWN n: Num { v = -9223372036854775807 - 2 }"}`, 400, "E2008"},
		{"Int overflow in a product", `{"query": "SPAWN n: Num { v = 4611686018427387904 * 2 }"}`, 400, "E2008"},
		{"a JSON integer past 64 bits", `{"query": "SPAWN n: Num { v = $v }", "params": {"v": 9223372036854775808}}`, 400, "E4001"},
		{"a body that is not UTF-8", "{\"query\": \"SPAWN n: Num { s = \\\"\xff\xfe\\\" }\"}", 400, "E4001"},
	} {
		st, body := post([]byte(tc.body))
		if st != tc.status || !strings.Contains(body, `"`+tc.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", tc.what, st, body, tc.status, tc.code)
		}
	}
	if r := mustQuery(t, u, `MATCH n: Num RETURN COUNT(n)`); rowsJSON(r, 0) != "[[0]]" {
		t.Fatalf("refused statements wrote: %s", rowsJSON(r, 0))
	}
	// A JSON integer that fits, and a float past 64 bits written as one, still work.
	if st, body := post([]byte(`{"query": "SPAWN n: Num { v = $v, f = $f }", "params": {"v": 9223372036854775807, "f": 1e30}}`)); st != http.StatusOK {
		t.Fatalf("values that fit: %d %s", st, body)
	}
}
