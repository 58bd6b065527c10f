package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/graph"
)

// TestDeliveryIDsAreNotReadable holds a consume lease and a queue lock, then reads
// everything another client can read — every node of every type, system types
// included, and the whole change log — and finds neither the delivery id nor the lock
// id. Only their hashes are kept, and a hash does not settle the message.
func TestDeliveryIDsAreNotReadable(t *testing.T) {
	e := newQueueEnv(t)
	addr := e.srv.Addr()
	post(t, addr, `SPAWN j: Job { n = 1 }`)
	deliveryID := consumeOne(t, addr, `WATCH j: Job [mode: consume] RETURN j`)
	e.push("q1", map[string]any{"job": 7}, 0)
	code, popped := e.pop("q1", "require_ack=true")
	wantStatus(t, "pop", code, http.StatusOK, popped)
	lockID, _ := popped["lock_id"].(string)
	if lockID == "" {
		t.Fatalf("pop with acknowledgement gave no lock id: %v", popped)
	}
	secrets := map[string]string{"delivery id": deliveryID, "lock id": lockID}

	// Every node of every type, as a client reads it.
	var types []string
	_ = e.srv.currentStack().eng.View(func(tx *graph.Tx, _, _ uint64) error {
		types = tx.Graph().NodeTypes()
		return nil
	})
	for _, typ := range []string{"_Watch", "_QueueLock", "QueueItem", "Job"} {
		if !contains(types, typ) {
			t.Fatalf("type %s is not declared (types %v): the test would read nothing", typ, types)
		}
	}
	for _, typ := range types {
		code, body := post(t, addr, `MATCH n: `+typ+` RETURN n`)
		if code != http.StatusOK {
			t.Fatalf("MATCH n: %s: %d %v", typ, code, body)
		}
		raw, _ := json.Marshal(body)
		for what, s := range secrets {
			if strings.Contains(string(raw), s) {
				t.Fatalf("MATCH n: %s shows the %s: %s", typ, what, raw)
			}
		}
	}
	// The change log, which resumable watches replay.
	sets, err := e.srv.currentStack().eng.Changes(context.Background(), 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(sets)
	for what, s := range secrets {
		if strings.Contains(string(raw), s) {
			t.Fatalf("the change log holds the %s", what)
		}
	}
	// What is kept is a hash, and a hash settles nothing.
	handle := delivery.HandleOf(deliveryID).String()
	code, body := post(t, addr, `ACK "`+handle+`"`)
	if code != http.StatusNotFound || body["error"].(map[string]any)["code"] != string(herald.CodeInvalidDeliveryID) {
		t.Fatalf("ACK with the delivery's hash: %d %v, want 404 %s", code, body, herald.CodeInvalidDeliveryID)
	}
	if code, body := post(t, addr, `ACK "`+deliveryID+`"`); code != http.StatusOK {
		t.Fatalf("ACK by the holder: %d %v", code, body)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
