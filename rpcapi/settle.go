package rpcapi

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/delivery"
)

var settleActions = map[heraldv1.Settlement_Action]delivery.Action{
	heraldv1.Settlement_ACTION_ACK:    delivery.ActAck,
	heraldv1.Settlement_ACTION_NACK:   delivery.ActNack,
	heraldv1.Settlement_ACTION_REJECT: delivery.ActReject,
	heraldv1.Settlement_ACTION_EXTEND: delivery.ActExtend,
}

// Settle commits a batch of settlements in one transaction; each reports its own
// outcome. A malformed batch is invalid_argument (E4001) and settles nothing.
func (s *Service) Settle(ctx context.Context, req *connect.Request[heraldv1.SettleRequest]) (*connect.Response[heraldv1.SettleResponse], error) {
	del, err := s.consumer()
	if err != nil {
		return nil, err
	}
	items, err := settlements(req.Msg.GetSettlements())
	if err != nil {
		return nil, toConnect(err)
	}
	results, seq, tick := del.SettleMany(ctx, items)
	if seq == 0 {
		seq, tick = s.eng.Position()
	}
	out := &heraldv1.SettleResponse{Seq: seq, Tick: tick, Results: make([]*heraldv1.SettleResult, len(results))}
	for i, r := range results {
		res := &heraldv1.SettleResult{DeliveryId: items[i].DeliveryID, Ok: r.Err == nil}
		if r.Err != nil {
			res.Error = errorDetail(r.Err)
		} else if items[i].Action == delivery.ActExtend {
			res.Deadline = timestamppb.New(r.Deadline.UTC().Round(time.Microsecond))
		}
		out.Results[i] = res
	}
	return connect.NewResponse(out), nil
}
