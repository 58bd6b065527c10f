package server

import (
	"strings"
	"testing"

	"github.com/herald-mq/herald/client"
	"github.com/herald-mq/herald/queue"
)

// The Go client checks queue ids and describes the REST API's bounds without importing
// the queue package: its copies must say what the server does.
func TestClientKnowsTheQueueBounds(t *testing.T) {
	if client.MaxQueueIDLength != queue.MaxIDLength || client.MaxPopCount != queue.MaxCount ||
		client.MinLockTTL != queue.MinTTL || client.MaxLockTTL != queue.MaxTTL || client.DefaultLockTTL != queue.DefaultTTL {
		t.Fatal("the client's queue bounds differ from the queue package's")
	}
	for _, id := range []string{"emails", "a.b-c_d~e:f", "", "a/b", "a b", "é", "ÿ", strings.Repeat("x", 128), strings.Repeat("x", 129)} {
		if client.ValidQueueID(id) != queue.ValidID(id) {
			t.Errorf("%q: the client says %v, the server %v", id, client.ValidQueueID(id), queue.ValidID(id))
		}
	}
	for c := 0; c < 256; c++ {
		id := string([]byte{byte(c)})
		if client.ValidQueueID(id) != queue.ValidID(id) {
			t.Errorf("byte %#x: the client says %v, the server %v", c, client.ValidQueueID(id), queue.ValidID(id))
		}
	}
}
