package server

import (
	"sort"
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
