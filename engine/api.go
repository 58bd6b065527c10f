package engine

import (
	"log/slog"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/store"
)

// Result, Stats and Response are the outcome of statements (see the root package).
type (
	Result   = herald.Result
	Stats    = herald.Stats
	Response = herald.Response
)

// TickMode selects how the logical clock advances.
type TickMode int

// Tick modes (see `herald serve --tick`).
const (
	TickCommit   TickMode = iota // every commit advances tick (default)
	TickManual                   // only the TICK statement advances tick
	TickInterval                 // a timer advances tick every Config.TickInterval
)

// Statement limits' defaults (Config.StatementTimeout, Config.MaxRowsScanned): far
// above what a query of a broker's working set takes, low enough that one runaway
// statement cannot hold a core for minutes.
const (
	DefaultStatementTimeout = 30 * time.Second
	DefaultMaxRowsScanned   = 100_000_000
)

// Config configures an Engine.
type Config struct {
	Backend      store.Backend // required; a successful Open takes it over (Close closes it)
	Clock        herald.Clock  // nil means the real clock
	Logger       *slog.Logger  // nil means slog.Default()
	TickMode     TickMode
	TickInterval time.Duration // for TickInterval
	// Retention is how many change sets the durable change log keeps (0 = keep all).
	Retention uint64
	// SessionIdle closes server-side sessions (rolling back an open transaction) after
	// this long without use. 0 means 10 minutes.
	SessionIdle time.Duration
	// MaxGroup caps how many transactions one group commit may hold. 0 means 1024.
	MaxGroup int
	// StatementTimeout stops a statement that runs longer (E4012); 0 means
	// DefaultStatementTimeout, a negative value none.
	StatementTimeout time.Duration
	// MaxRowsScanned stops a statement that examines more bindings (E4012); 0 means
	// DefaultMaxRowsScanned, a negative value none.
	MaxRowsScanned int
	// MaxWatchesPerSession caps the watches one session holds, watch and consume mode
	// together (E8006 past it). 0 means DefaultMaxWatchesPerSession.
	MaxWatchesPerSession int
	// MinFreeBytes is the free-space reserve (space.go): below it, on a backend that
	// reports its disk's free space, writes are refused with E5005. 0 means
	// DefaultMinFreeBytes, a negative value no reserve.
	MinFreeBytes int64
	// MaxWatchesPerPrincipal caps the watches one principal holds across its sessions
	// and connections, both modes together (E8006). 0 means
	// DefaultMaxWatchesPerPrincipal.
	MaxWatchesPerPrincipal int
	// Layer0Interval is how often services write their _Watch counters (events
	// delivered, pending, last event). 0 means DefaultLayer0Interval.
	Layer0Interval time.Duration
	// BodyCache is how many bytes of newly written node bodies stay in memory (see
	// herald.Body). 0 means DefaultBodyCache; a negative value keeps none once durable.
	BodyCache int
	// Follower opens the engine read-only, to follow another node's change log with
	// Follow: it commits nothing (a commit answers E5006 NOT_LEADER), and neither cleans
	// the last run's sessions nor writes _Watch counters nor advances ticks.
	Follower bool
	// KeepBackend leaves Backend to the caller: Close does not close it (a node that
	// changes role opens engines one after the other on one store).
	KeepBackend bool
}
