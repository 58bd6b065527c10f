package client

import (
	"context"
	"strconv"
	"time"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/parser"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

// ConsumerConfig is a consume watch as Go values: Statement builds its WATCH … [mode:
// consume] statement as a tree of the language and prints it, so no value is ever
// spliced into query text. The zero value of a field leaves its option out (the
// server's default applies). For what it does not cover — joins, edges, a projection,
// triggers — write the WATCH statement and give it to Client.Subscribe.
//
//	cfg := client.ConsumerConfig{Type: "Email", Group: "mailers", MaxAttempts: 5,
//		Backoff: client.Exponential(time.Second, 2, time.Minute), DeadLetter: "failed_emails"}
//	// WATCH m: Email [mode: consume, group: "mailers", max_redeliveries: 4,
//	//   backoff: exponential(1s, 2.0, 1m), dead_letter: #failed_emails] RETURN m
type ConsumerConfig struct {
	// Type is the type of the messages (required).
	Type string
	// Var names a message in Filter and in the statement; the default is "m".
	Var string
	// Filter is a condition on the message, in the query language (`m.region = $r AND
	// m.size < 100`): the statement's WHERE. Params binds its $parameters.
	Filter string
	Params map[string]any

	// Group makes the consumer a member of a group: members share the messages.
	// Without one it is a group of its own.
	Group string
	// OrderBy orders the messages by attributes (`ordering: attribute(…)`); without
	// it they come in arrival order. ByPriority orders by the attribute WithPriority
	// sets.
	OrderBy []OrderKey
	// Fairness names the attribute holding a message's fairness key
	// (AttrFairnessKey, which WithFairnessKey sets): the keys are served in turn.
	// Weight names an attribute holding a key's weight (its share of each turn).
	Fairness string
	Weight   string
	// AvailableAt names the attribute holding the time a message becomes available
	// (AttrAvailableAt, which WithDelay sets); without it delayed messages come at
	// once.
	AvailableAt string

	// AckTimeout is how long a delivery is leased before it is redelivered (the
	// server's default is 30s).
	AckTimeout time.Duration
	// MaxAttempts bounds the deliveries of a message: once that many have failed (by
	// NACK or ack timeout), it is dead-lettered. 1 means no retry; 0 is the server's
	// default of 4 (max_redeliveries: 3).
	MaxAttempts int
	// Backoff delays redeliveries (Fixed, Exponential); the zero value redelivers at
	// once.
	Backoff Backoff
	// DeadLetter is the id of a node (without '#') that dead letters are linked to,
	// besides the watch: `MATCH d: _DeadLetter, _dead_letter_destination(d, #id)`.
	DeadLetter string

	// Prefetch, Concurrency and Policy are the subscription's WithPrefetch,
	// WithConcurrency and WithPolicy; options given to Consume override them.
	Prefetch    int
	Concurrency int
	Policy      Policy
}

// OrderKey is one key of ConsumerConfig.OrderBy: an attribute, ascending unless Desc.
type OrderKey struct {
	Attr string
	Desc bool
}

// ByPriority orders by the attribute WithPriority sets, lowest (0, the highest
// priority) first.
var ByPriority = []OrderKey{{Attr: AttrPriority}}

// Backoff is the delay before a NACKed or timed-out message is redelivered: Initial,
// then multiplied by Factor at every further attempt, up to Max.
type Backoff struct {
	Initial time.Duration
	Factor  float64
	Max     time.Duration
}

// Fixed waits d before every redelivery.
func Fixed(d time.Duration) Backoff { return Backoff{Initial: d, Factor: 1, Max: d} }

// Exponential waits initial, then factor times longer at every attempt, up to max.
func Exponential(initial time.Duration, factor float64, max time.Duration) Backoff {
	return Backoff{Initial: initial, Factor: factor, Max: max}
}

// Statement returns the WATCH statement of the configuration.
func (cfg ConsumerConfig) Statement() (string, error) {
	w, err := cfg.watch()
	if err != nil {
		return "", err
	}
	return printer.String(w), nil
}

// watch builds the statement's tree.
func (cfg ConsumerConfig) watch() (*ast.WatchStmt, error) {
	v := cfg.Var
	if v == "" {
		v = "m"
	}
	if !isIdent(cfg.Type) || !isIdent(v) {
		return nil, invalid("consumer: type %q and variable %q must be identifiers", cfg.Type, v)
	}
	m := ast.NewIdent(v)
	w := &ast.WatchStmt{Pattern: ast.Bind(v, cfg.Type), Return: ast.Returning(m)}
	if cfg.Filter != "" {
		x, err := parser.ParseExpr(cfg.Filter)
		if err != nil {
			return nil, invalid("consumer: filter %q: %v", cfg.Filter, err)
		}
		w.Where = x
	}
	opts, err := cfg.options(m)
	if err != nil {
		return nil, err
	}
	w.Options = []*ast.OptionList{ast.Options(opts...)}
	return w, nil
}

// options returns the statement's watch options, mode first.
func (cfg ConsumerConfig) options(m *ast.Ident) ([]*ast.WatchOption, error) {
	opts := []*ast.WatchOption{ast.Option("mode", ast.NewIdent("consume"))}
	add := func(name string, x ast.Expr) { opts = append(opts, ast.Option(name, x)) }
	attr := func(what, name string) (ast.Expr, error) {
		if !isIdent(name) {
			return nil, invalid("consumer: %s attribute %q is not an identifier", what, name)
		}
		return ast.Sel(m, name), nil
	}
	if cfg.Group != "" {
		add("group", ast.Str(cfg.Group))
	}
	if len(cfg.OrderBy) > 0 {
		keys := make([]*ast.OrderItem, len(cfg.OrderBy))
		for i, k := range cfg.OrderBy {
			x, err := attr("ordering", k.Attr)
			if err != nil {
				return nil, err
			}
			keys[i] = ast.Asc(x)
			if k.Desc {
				keys[i] = ast.Desc(x)
			}
		}
		add("ordering", ast.Ordering(keys...))
	}
	for _, a := range []struct{ opt, name string }{{"fairness", cfg.Fairness}, {"weight", cfg.Weight}, {"available_at", cfg.AvailableAt}} {
		if a.name == "" {
			continue
		}
		x, err := attr(a.opt, a.name)
		if err != nil {
			return nil, err
		}
		add(a.opt, x)
	}
	more, err := cfg.deliveryOptions()
	return append(opts, more...), err
}

// deliveryOptions returns the options of leases, retries and dead letters.
func (cfg ConsumerConfig) deliveryOptions() ([]*ast.WatchOption, error) {
	var opts []*ast.WatchOption
	switch {
	case cfg.AckTimeout < 0:
		return nil, invalid("consumer: ack timeout %v: want a positive duration", cfg.AckTimeout)
	case cfg.AckTimeout > 0:
		opts = append(opts, ast.Option("ack_timeout", ast.Dur(cfg.AckTimeout)))
	}
	switch {
	case cfg.MaxAttempts < 0:
		return nil, invalid("consumer: max attempts %d: want 1 or more (0: the server's default)", cfg.MaxAttempts)
	case cfg.MaxAttempts > 0:
		opts = append(opts, ast.Option("max_redeliveries", ast.Int(int64(cfg.MaxAttempts-1))))
	}
	if cfg.Backoff != (Backoff{}) {
		x, err := cfg.Backoff.expr()
		if err != nil {
			return nil, err
		}
		opts = append(opts, ast.Option("backoff", x))
	}
	if cfg.DeadLetter != "" {
		if !isIdent(cfg.DeadLetter) {
			return nil, invalid("consumer: dead letter %q: want a node id of letters, digits and _", cfg.DeadLetter)
		}
		opts = append(opts, ast.Option("dead_letter", ast.Ref(cfg.DeadLetter)))
	}
	return opts, nil
}

// expr returns the backoff option's value: fixed(d) when it does not grow, else
// exponential(initial, factor, max).
func (b Backoff) expr() (ast.Expr, error) {
	switch {
	case b.Initial <= 0 || b.Max < b.Initial:
		return nil, invalid("consumer: backoff %v up to %v: want 0 < initial <= max", b.Initial, b.Max)
	case b.Factor < 1:
		return nil, invalid("consumer: backoff factor %v: want 1 or more", b.Factor)
	case b.Factor == 1 && b.Max == b.Initial:
		return ast.Call("fixed", ast.Dur(b.Initial)), nil
	}
	f := strconv.FormatFloat(b.Factor, 'f', -1, 64)
	if f == strconv.FormatInt(int64(b.Factor), 10) {
		f += ".0"
	}
	factor := &ast.BasicLit{Kind: token.FLOAT, Value: f}
	return ast.Call("exponential", ast.Dur(b.Initial), factor, ast.Dur(b.Max)), nil
}

// Consume starts the consume watch cfg describes and runs handler on every message:
// Subscribe with cfg's statement, its Params, and its Prefetch, Concurrency and
// Policy (opts given here override them).
func (c *Client) Consume(ctx context.Context, cfg ConsumerConfig, handler Handler, opts ...SubscribeOption) (*Subscription, error) {
	stmt, err := cfg.Statement()
	if err != nil {
		return nil, err
	}
	base := []SubscribeOption{WithPolicy(cfg.Policy)}
	if cfg.Params != nil {
		base = append(base, WithParams(cfg.Params))
	}
	if cfg.Prefetch != 0 {
		base = append(base, WithPrefetch(cfg.Prefetch))
	}
	if cfg.Concurrency != 0 {
		base = append(base, WithConcurrency(cfg.Concurrency))
	}
	return c.Subscribe(ctx, stmt, handler, append(base, opts...)...)
}
