package delivery_test

import (
	"context"
	"testing"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/delivery"
)

// TestStoppedServiceHandlesNoStatement: ACK reaches the consume engine while it runs,
// and answers E4006 once it has stopped, as on an engine that never had one.
func TestStoppedServiceHandlesNoStatement(t *testing.T) {
	eng, svc := openService(t, delivery.Config{})
	ctx := context.Background()
	ack := func() herald.Code {
		_, err := eng.Exec(ctx, "", `ACK "nobody"`, nil)
		return herald.CodeOf(err)
	}
	if got := ack(); got != herald.CodeInvalidDeliveryID {
		t.Fatalf("running: %s, want E8004", got)
	}
	if err := svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ack(); got != herald.CodeNotImplemented {
		t.Fatalf("stopped: %s, want E4006", got)
	}
}
