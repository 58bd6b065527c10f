package httpapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald/broker"
)

// TestSettle: POST /v1/settle hands the batch to the consume engine in order and
// answers one result per settlement with the commit's position.
func TestSettle(t *testing.T) {
	del := &fakeDelivery{}
	h := newTestHandler(t, &fakeEngine{}, Options{}, del)
	w := do(t, h, "POST", "/v1/settle", `{"settlements": [
		{"delivery_id": "d1", "action": "ack"},
		{"delivery_id": "d2", "action": "NACK", "delay": "5s"},
		{"delivery_id": "bad3", "action": "ack"},
		{"delivery_id": "d4", "action": "reject"},
		{"delivery_id": "d5", "action": "extend", "by": "1m"}]}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	want := `{"results":[{"delivery_id":"d1","ok":true},{"delivery_id":"d2","ok":true},` +
		`{"delivery_id":"bad3","ok":false,"error":{"code":"E8004","name":"INVALID_DELIVERY_ID","message":"delivery \"bad3\" is unknown"}},` +
		`{"delivery_id":"d4","ok":true},{"delivery_id":"d5","ok":true,"deadline":"2025-01-01T00:01:00Z"}],"seq":42,"tick":40}`
	if got := strings.TrimSpace(w.Body.String()); got != want {
		t.Fatalf("answer\n got  %s\n want %s", got, want)
	}
	wantItems := []broker.Settle{
		{DeliveryID: "d1", Action: broker.ActAck},
		{DeliveryID: "d2", Action: broker.ActNack, Delay: 5 * time.Second},
		{DeliveryID: "bad3", Action: broker.ActAck},
		{DeliveryID: "d4", Action: broker.ActReject},
		{DeliveryID: "d5", Action: broker.ActExtend, By: time.Minute},
	}
	if fmt.Sprint(del.settled) != fmt.Sprint(wantItems) {
		t.Fatalf("settled %v, want %v", del.settled, wantItems)
	}
}

// TestSettleRefusals: a malformed batch answers E4001 as a whole and settles nothing.
func TestSettleRefusals(t *testing.T) {
	del := &fakeDelivery{}
	h := newTestHandler(t, &fakeEngine{}, Options{}, del)
	many := strings.Repeat(`{"delivery_id":"d","action":"ack"},`, broker.MaxSettlements)
	for _, c := range []struct{ name, body string }{
		{"empty", `{"settlements": []}`},
		{"no list", `{}`},
		{"unknown action", `{"settlements": [{"delivery_id": "d1", "action": "drop"}]}`},
		{"no id", `{"settlements": [{"action": "ack"}]}`},
		{"bad delay", `{"settlements": [{"delivery_id": "d1", "action": "nack", "delay": "soon"}]}`},
		{"negative by", `{"settlements": [{"delivery_id": "d1", "action": "extend", "by": "-1s"}]}`},
		{"delay on ack", `{"settlements": [{"delivery_id": "d1", "action": "ack", "delay": "1s"}]}`},
		{"unknown field", `{"settlements": [{"delivery_id": "d1", "action": "ack", "why": "x"}]}`},
		{"too many", `{"settlements": [` + many + `{"delivery_id":"d","action":"ack"}]}`},
	} {
		w := do(t, h, "POST", "/v1/settle", c.body)
		if w.Code != 400 || !strings.Contains(w.Body.String(), `"E4001"`) {
			t.Errorf("%s: status %d %s, want 400 E4001", c.name, w.Code, w.Body)
		}
	}
	if len(del.settled) != 0 {
		t.Fatalf("settled %v", del.settled)
	}
}
