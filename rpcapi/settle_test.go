package rpcapi

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/broker"
)

// TestSettle: the Settle RPC hands the batch to the consume engine in order and
// answers one result per settlement, with the commit's position.
func TestSettle(t *testing.T) {
	del := &fakeDelivery{deadline: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	c, _ := serve(t, &fakeEngine{}, del)
	resp, err := c.Settle(context.Background(), connect.NewRequest(&heraldv1.SettleRequest{Settlements: []*heraldv1.Settlement{
		{DeliveryId: "d1", Action: heraldv1.Settlement_ACTION_ACK},
		{DeliveryId: "d2", Action: heraldv1.Settlement_ACTION_NACK, Delay: durationpb.New(5 * time.Second)},
		{DeliveryId: "bad3", Action: heraldv1.Settlement_ACTION_ACK},
		{DeliveryId: "d4", Action: heraldv1.Settlement_ACTION_REJECT},
		{DeliveryId: "d5", Action: heraldv1.Settlement_ACTION_EXTEND, By: durationpb.New(time.Minute)},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Msg
	if r.Seq != 42 || r.Tick != 41 || len(r.Results) != 5 {
		t.Fatalf("answer %v", r)
	}
	for i, ok := range []bool{true, true, false, true, true} {
		if r.Results[i].Ok != ok {
			t.Errorf("result %d: %v", i, r.Results[i])
		}
	}
	if e := r.Results[2].Error; e == nil || e.Code != "E8004" || e.Name != "INVALID_DELIVERY_ID" {
		t.Errorf("the unknown id's error: %v", e)
	}
	if d := r.Results[4].Deadline.AsTime(); !d.Equal(del.deadline) {
		t.Errorf("deadline %v", d)
	}
	want := []broker.Settle{
		{DeliveryID: "d1", Action: broker.ActAck},
		{DeliveryID: "d2", Action: broker.ActNack, Delay: 5 * time.Second},
		{DeliveryID: "bad3", Action: broker.ActAck},
		{DeliveryID: "d4", Action: broker.ActReject},
		{DeliveryID: "d5", Action: broker.ActExtend, By: time.Minute},
	}
	if fmt.Sprint(del.settled) != fmt.Sprint(want) {
		t.Fatalf("settled %v, want %v", del.settled, want)
	}
}

// TestSettleRefusals: a malformed batch is invalid_argument with E4001 and settles
// nothing.
func TestSettleRefusals(t *testing.T) {
	del := &fakeDelivery{}
	c, _ := serve(t, &fakeEngine{}, del)
	for name, sts := range map[string][]*heraldv1.Settlement{
		"empty":          nil,
		"no action":      {{DeliveryId: "d1"}},
		"no id":          {{Action: heraldv1.Settlement_ACTION_ACK}},
		"delay on ack":   {{DeliveryId: "d1", Action: heraldv1.Settlement_ACTION_ACK, Delay: durationpb.New(time.Second)}},
		"by on nack":     {{DeliveryId: "d1", Action: heraldv1.Settlement_ACTION_NACK, By: durationpb.New(time.Second)}},
		"negative delay": {{DeliveryId: "d1", Action: heraldv1.Settlement_ACTION_NACK, Delay: durationpb.New(-time.Second)}},
	} {
		_, err := c.Settle(context.Background(), connect.NewRequest(&heraldv1.SettleRequest{Settlements: sts}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: %v, want invalid_argument", name, err)
		}
	}
	if len(del.settled) != 0 {
		t.Fatalf("settled %v", del.settled)
	}
}
