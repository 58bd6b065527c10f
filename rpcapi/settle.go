package rpcapi

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	heraldv1 "github.com/herald-mq/herald/api/heraldv1"
	"github.com/herald-mq/herald/broker"
)

var settleActions = map[heraldv1.Settlement_Action]broker.Action{
	heraldv1.Settlement_ACTION_ACK:    broker.ActAck,
	heraldv1.Settlement_ACTION_NACK:   broker.ActNack,
	heraldv1.Settlement_ACTION_REJECT: broker.ActReject,
	heraldv1.Settlement_ACTION_EXTEND: broker.ActExtend,
}

// Settle commits a batch of settlements in one transaction; each reports its own
// outcome. A malformed batch is invalid_argument (E4001) and settles nothing.
func (s *Service) Settle(ctx context.Context, req *connect.Request[heraldv1.SettleRequest]) (*connect.Response[heraldv1.SettleResponse], error) {
	items, err := settlements(req.Msg.GetSettlements())
	if err != nil {
		return nil, toConnect(err)
	}
	results, seq, tick := s.b.Settle(ctx, items)
	if seq == 0 {
		seq, tick = s.b.Position()
	}
	out := &heraldv1.SettleResponse{Seq: seq, Tick: tick, Results: make([]*heraldv1.SettleResult, len(results))}
	for i, r := range results {
		res := &heraldv1.SettleResult{DeliveryId: items[i].DeliveryID, Ok: r.Err == nil}
		if r.Err != nil {
			res.Error = errorDetail(r.Err)
		} else if items[i].Action == broker.ActExtend {
			res.Deadline = timestamppb.New(r.Deadline.UTC().Round(time.Microsecond))
		}
		out.Results[i] = res
	}
	return connect.NewResponse(out), nil
}

// settleOne settles one delivery and answers its outcome as the error.
func (s *Service) settleOne(ctx context.Context, it broker.Settle) (broker.SettleResult, error) {
	res, _, _ := s.b.Settle(ctx, []broker.Settle{it})
	return res[0], res[0].Err
}
