package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/auth"
	"github.com/herald-mq/herald/broker"
	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/memstore"
	"github.com/herald-mq/herald/store/pgstore"
)

// cluster is a node's membership of the nodes sharing one PostgreSQL store: its store,
// its leadership loop, the seam its surfaces hold (switched to the services of each
// role the node takes), and what it knows of its lag.
type cluster struct {
	pg    *pgstore.Store
	roles *roles
	sw    *switchBroker

	mu         sync.Mutex
	storeSeq   uint64    // the store's position, as last read
	caughtUpAt time.Time // when the node last had applied everything the store held
}

// IsPostgres reports whether a Config.Store names a PostgreSQL database.
func IsPostgres(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// startCluster opens the shared store and settles the node's first role: it leads if
// nobody holds the lease, and follows otherwise. The returned seam follows the role.
func (s *Server) startCluster(ctx context.Context, addr string) (broker.Broker, error) {
	pg, err := pgstore.Open(ctx, s.cfg.Store, pgstore.Options{Schema: s.cfg.StoreSchema, Logger: s.log.With("component", "pgstore"), Clock: s.clock()})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	name, address := s.identity(addr)
	ttl := s.cfg.LeaseTTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	cl := &cluster{pg: pg, sw: &switchBroker{}}
	cl.roles = &roles{lease: pg, clock: s.clock(), log: s.log.With("component", "cluster", "node", name),
		name: name, address: address, ttl: ttl, become: s.become}
	cl.roles.report = func(ctx context.Context) { s.report(ctx) }
	cl.roles.failed = s.failed
	cl.sw.set(&followerNode{leader: cl.leader, status: s.status})
	s.cluster = cl
	if err := cl.roles.start(ctx); err != nil {
		_ = pg.Close()
		s.cluster = nil
		return nil, err
	}
	s.report(ctx)
	return cl.sw, nil
}

// leader is where the leader serves clients, as the node last read it.
func (cl *cluster) leader() string {
	_, _, l, _ := cl.roles.state()
	return l
}

// identity is the node's name and the address it advertises.
func (s *Server) identity(addr string) (name, address string) {
	host, port, _ := net.SplitHostPort(addr)
	hostname, _ := os.Hostname()
	name = s.cfg.NodeName
	if name == "" {
		name = hostname + ":" + port
	}
	address = s.cfg.Advertise
	if address == "" {
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			host = hostname
		}
		scheme := "http"
		if s.tls != nil {
			scheme = "https"
		}
		address = scheme + "://" + net.JoinHostPort(host, port)
	}
	return name, address
}

// become switches the node's services to role (the roles loop calls it). Between the
// two, the seam answers as a follower that knows no leader, so clients retry.
func (s *Server) become(ctx context.Context, role string, term uint64) error {
	cl := s.cluster
	cl.sw.set(&followerNode{leader: func() string { return "" }, status: s.status})
	if old := s.swapStack(nil); old != nil {
		if err := old.close(ctx); err != nil {
			s.log.Warn("closing the services of the last role", "role", old.role, "err", err)
		}
	}
	var st *stack
	var err error
	if role == RoleLeader {
		st, err = s.openLeader(ctx, cl.pg, true)
	} else {
		cl.pg.SetTerm(0) // nothing this node commits from now on can pass the fence
		st, err = s.openFollower(ctx, cl.pg, cl.pg.WaitChanges, cl.leader)
	}
	if err != nil {
		return err
	}
	s.swapStack(st)
	cl.sw.set(st.b)
	seq, _ := st.eng.Position()
	s.log.Info("serving as "+role, "term", term, "seq", seq)
	return nil
}

// swapStack makes st the node's current services and returns the last ones. The
// principals and tokens of the last stack stay in use until another has some.
func (s *Server) swapStack(st *stack) *stack {
	s.smu.Lock()
	defer s.smu.Unlock()
	old := s.stack
	s.stack = st
	if st != nil {
		s.tokens = st.auth
	}
	return old
}

// currentTokens are the principals and tokens requests are authenticated against.
func (s *Server) currentTokens() *auth.Store {
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.tokens
}

// stopCluster ends the node's part in its cluster: no more role changes, the lease
// given back if it leads, its services closed and the store with them.
func (s *Server) stopCluster(ctx context.Context) error {
	cl := s.cluster
	cl.roles.close(ctx)
	var errs []error
	if st := s.swapStack(nil); st != nil {
		if err := st.close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := cl.pg.Close(); err != nil {
		errs = append(errs, fmt.Errorf("server: close store: %w", err))
	}
	return errors.Join(errs...)
}

func (s *Server) currentStack() *stack {
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.stack
}

// report records the node's position and lag in the store, for herald status.
func (s *Server) report(ctx context.Context) {
	cl := s.cluster
	st := s.currentStack()
	if cl == nil || st == nil {
		return
	}
	m, err := cl.pg.Meta(ctx)
	if err != nil {
		return
	}
	seq, _ := st.eng.Position()
	now := s.clock().Now()
	cl.mu.Lock()
	cl.storeSeq = m.Seq
	if seq >= m.Seq || cl.caughtUpAt.IsZero() {
		cl.caughtUpAt = now
	}
	behind := now.Sub(cl.caughtUpAt)
	cl.mu.Unlock()
	role, _, _, _ := cl.roles.state()
	if err := cl.pg.Heartbeat(ctx, pgstore.Node{Name: cl.roles.name, Address: cl.roles.address, Role: role, Seq: seq, Behind: behind}); err != nil {
		s.log.Debug("reporting to the store", "err", err)
	}
}

// failed reports why the node's current services cannot go on (the roles loop then
// starts the node again as a follower, from the store): a leader's engine that failed
// a commit refuses work until it is opened again (a full local disk, E5005, passes by
// itself and does not count); a follower's graph that can no longer follow the change
// log (truncated past its position) must be loaded again.
func (s *Server) failed() error {
	st := s.currentStack()
	switch {
	case st == nil:
		return nil
	case st.role == RoleLeader:
		if err := st.eng.Err(); herald.CodeOf(err) == herald.CodeStorage {
			return err
		}
	default:
		if p := st.followErr.Load(); p != nil {
			return *p
		}
	}
	return nil
}

// lag is how many commits and how long the node's graph is behind the store.
func (s *Server) lag() (commits uint64, behind time.Duration) {
	cl, st := s.cluster, s.currentStack()
	if cl == nil || st == nil {
		return 0, 0
	}
	seq, _ := st.eng.Position()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.storeSeq > seq {
		commits = cl.storeSeq - seq
		behind = s.clock().Now().Sub(cl.caughtUpAt)
	}
	return commits, behind
}

// role is the node's role and the leader's address ("" when no node leads), for
// /readyz: a node on a store of its own leads, at its own address.
func (s *Server) role() (role, leader string) {
	cl := s.cluster
	if cl == nil {
		_, address := s.identity(s.Addr())
		return RoleLeader, address
	}
	role, _, leader, _ = cl.roles.state()
	return role, leader
}

// status is the node's view of itself and of the nodes sharing its store.
func (s *Server) status(ctx context.Context) (broker.Status, error) {
	st := s.currentStack()
	var seq uint64
	if st != nil {
		seq, _ = st.eng.Position()
	}
	cl := s.cluster
	if cl == nil {
		name, address := s.identity(s.Addr())
		self := broker.NodeStatus{Name: name, Address: address, Role: RoleLeader, Seq: seq}
		return broker.Status{Name: name, Role: RoleLeader, Address: address, Leader: address, Seq: seq, Store: s.storeKind(), Nodes: []broker.NodeStatus{self}}, nil
	}
	role, term, leader, _ := cl.roles.state()
	out := broker.Status{Name: cl.roles.name, Role: role, Address: cl.roles.address, Leader: leader, Term: term, Seq: seq, Store: "postgres"}
	nodes, err := cl.pg.Nodes(ctx)
	if err != nil {
		return out, herald.Errorf(herald.CodeStorage, "reading the nodes from the store: %v", err)
	}
	for _, n := range nodes {
		out.Nodes = append(out.Nodes, broker.NodeStatus{Name: n.Name, Address: n.Address, Role: n.Role, Seq: n.Seq,
			Behind: n.Behind.Seconds(), Age: n.Age.Seconds()})
	}
	return out, nil
}

// storeKind names the store of a node that has one of its own: "pebble", or
// "memory" for the in-memory store that tests give as Config.Backend.
func (s *Server) storeKind() string {
	s.mu.Lock()
	b := s.backend
	s.mu.Unlock()
	if _, ok := b.(*memstore.Store); ok {
		return "memory"
	}
	return "pebble"
}

// Metrics are the figures of the node's current services and of its place in the
// cluster (herald.MetricSource).
func (s *Server) Metrics() []herald.Metric {
	var out []herald.Metric
	if st := s.currentStack(); st != nil {
		out = st.metrics()
	}
	cl := s.cluster
	if cl == nil {
		return append(out, herald.Metric{Name: "herald_node_leader", Help: "1 on the node that leads (a node on a store of its own always does), 0 on a follower.", Value: 1})
	}
	role, term, _, changes := cl.roles.state()
	leading := 0.0
	if role == RoleLeader {
		leading = 1
	}
	commits, behind := s.lag()
	return append(out,
		herald.Metric{Name: "herald_node_leader", Help: "1 on the node that leads (a node on a store of its own always does), 0 on a follower.", Value: leading},
		herald.Metric{Name: "herald_leadership_term", Help: "The leadership term the node knows of.", Value: float64(term)},
		herald.Metric{Name: "herald_leadership_changes_total", Help: "Times this node took the lead or stepped down.", Counter: true, Value: float64(changes)},
		herald.Metric{Name: "herald_replication_lag_commits", Help: "Commits in the store that the node's graph has not applied yet.", Value: float64(commits)},
		herald.Metric{Name: "herald_replication_lag_seconds", Help: "How long the node's graph has been behind the store (0 when caught up).", Value: behind.Seconds()},
	)
}

func (s *Server) clock() herald.Clock {
	if s.cfg.Clock != nil {
		return s.cfg.Clock
	}
	return clock.Real()
}
