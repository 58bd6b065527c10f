package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/herald-mq/herald"
)

// ClusterStatus is what a node knows of the nodes sharing its store (GET /v1/cluster):
// itself, the leader, and every node as it last reported itself. A node on a store
// of its own (Pebble) leads, alone, at term 0.
type ClusterStatus struct {
	Name    string `json:"name"`    // the node that answered
	Role    string `json:"role"`    // its role: "leader" or "follower"
	Address string `json:"address"` // where it serves clients
	Leader  string `json:"leader"`  // where the leader serves clients; "" while no node leads
	Term    uint64 `json:"term"`    // the leadership term it knows of
	Seq     uint64 `json:"seq"`     // the position its graph has applied
	Store   string `json:"store"`   // "pebble", "postgres", or "memory" (tests)
	// Nodes are the nodes that have reported themselves to the store, by name; a node
	// that stopped stays listed, its report growing old.
	Nodes []NodeStatus `json:"nodes"`
}

// NodeStatus is one node sharing the store, as it last reported itself (every quarter
// of the leadership lease's TTL while it runs).
type NodeStatus struct {
	Name    string
	Address string
	Role    string        // as it reported: a node that stopped while leading still says "leader"; ClusterStatus.Leader is the lease's
	Seq     uint64        // the position it had applied
	Behind  time.Duration // how long its graph had been behind the store (0: caught up)
	Age     time.Duration // since its last report
}

// nodeWire is NodeStatus as GET /v1/cluster writes it, durations in seconds.
type nodeWire struct {
	Name    string  `json:"name"`
	Address string  `json:"address"`
	Role    string  `json:"role"`
	Seq     uint64  `json:"seq"`
	Behind  float64 `json:"behind_seconds"`
	Age     float64 `json:"age_seconds"`
}

// MarshalJSON writes n as GET /v1/cluster does, its durations in seconds
// (behind_seconds, age_seconds).
func (n NodeStatus) MarshalJSON() ([]byte, error) {
	return json.Marshal(nodeWire{n.Name, n.Address, n.Role, n.Seq, n.Behind.Seconds(), n.Age.Seconds()})
}

// UnmarshalJSON reads n as GET /v1/cluster writes it.
func (n *NodeStatus) UnmarshalJSON(b []byte) error {
	var w nodeWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*n = NodeStatus{Name: w.Name, Address: w.Address, Role: w.Role, Seq: w.Seq, Behind: seconds(w.Behind), Age: seconds(w.Age)}
	return nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Status asks the server what it knows of the nodes sharing its store: its own role,
// where the leader is, and each node's role, position and lag (GET /v1/cluster; the
// principal needs no grant beyond its credentials). Any node answers, leader or
// follower. A server that cannot be reached — the connection refused, the name not
// resolved, no answer within the client's timeout — is reported as E4025 UNREACHABLE,
// its cause kept for errors.As.
func (c *Client) Status(ctx context.Context) (ClusterStatus, error) {
	status, data, err := c.jsonCall(ctx, http.MethodGet, "/v1/cluster", nil)
	if err != nil {
		return ClusterStatus{}, unreachable(ctx, err)
	}
	if status != http.StatusOK {
		return ClusterStatus{}, answerError(status, data)
	}
	var out ClusterStatus
	if err := json.Unmarshal(data, &out); err != nil {
		return ClusterStatus{}, herald.Errorf(herald.CodeInternal, "client: GET /v1/cluster: unexpected answer %.200q", data)
	}
	if out.Nodes == nil {
		out.Nodes = []NodeStatus{}
	}
	return out, nil
}

// Unreached reports whether err, the failure of a call made under ctx, means that no
// server answered: the connection was refused or dropped, the name did not resolve, or
// the client's own timeout ran out (timedOut). The caller's context ending, the
// client's own refusals and a TLS handshake that failed (the server was reached, and
// the setup is wrong) are not. why is the cause in words.
func Unreached(ctx context.Context, err error) (why string, timedOut, ok bool) {
	var cert *tls.CertificateVerificationError
	var op *net.OpError
	switch {
	case ctx.Err() != nil, herald.CodeOf(err) != herald.CodeInternal, errors.As(err, &cert):
		return "", false, false
	case errors.As(err, &op) && op.Op == "remote error": // a TLS alert from the server
		return "", false, false
	case errors.Is(err, context.DeadlineExceeded):
		return "", true, true
	case op != nil:
		return op.Error(), false, true
	}
	return err.Error(), false, true
}

// unreachable reports err, a call that got no answer (Unreached), as E4025; other
// errors keep their own.
func unreachable(ctx context.Context, err error) error {
	why, timedOut, ok := Unreached(ctx, err)
	if !ok {
		return err
	}
	if timedOut {
		why = "no answer within the client's timeout"
	}
	where := "the server"
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			where = u.Scheme + "://" + u.Host
		}
	}
	return &herald.Error{Code: herald.CodeUnreachable, Message: "client: cannot reach " + where + ": " + why, Err: err}
}
