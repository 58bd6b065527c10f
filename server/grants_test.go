package server

import (
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/store/memstore"
)

// TestEveryOperationHasAGrant walks every method of the RPC services' descriptors and
// every route of the running server's HTTP router: each must have its entry in
// herald.Operations (a surface without one is refused, so a forgotten entry is a
// broken operation, and this test names it), and every entry must name an operation
// that exists.
func TestEveryOperationHasAGrant(t *testing.T) {
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger(), Auth: true})
	start(t, s)
	served := map[string]bool{}
	services := heraldv1.File_herald_proto.Services()
	for i := 0; i < services.Len(); i++ {
		sd := services.Get(i)
		for j := 0; j < sd.Methods().Len(); j++ {
			served["/"+string(sd.FullName())+"/"+string(sd.Methods().Get(j).Name())] = true
		}
	}
	routes := s.Routes()
	if len(routes) < 10 {
		t.Fatalf("the server lists %d routes: %v", len(routes), routes)
	}
	for _, r := range routes {
		served[r] = true
	}
	var missing, stale []string
	for op := range served {
		if _, ok := herald.Operations[op]; !ok {
			missing = append(missing, op)
		}
	}
	for _, op := range herald.OperationNames() {
		if !served[op] {
			stale = append(stale, op)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("operations without a grant in herald.Operations: %v", missing)
	}
	if len(stale) > 0 {
		t.Errorf("herald.Operations names operations nothing serves: %v", stale)
	}
}

// TestRefusalsInTheCallersProtocol: an unauthenticated request gets its refusal in the
// protocol it speaks — the JSON API's {"error": …} for POST /v1/query (a JSON POST,
// which Connect's error writer alone would take for a Connect call), Connect's error
// for an RPC.
func TestRefusalsInTheCallersProtocol(t *testing.T) {
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger(), Auth: true})
	start(t, s)
	for path, want := range map[string]string{
		"/v1/query":               `"error":{"code":"E4014"`,
		"/herald.v1.Herald/Query": `"code":"unauthenticated"`,
	} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.Addr()+path, strings.NewReader(`{"query": "MATCH n: N RETURN n"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer hrd_nope")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d %s, want 401 with %s", path, resp.StatusCode, b, want)
		}
	}
}
