package server

import (
	"github.com/herald-mq/herald/delivery"
	"github.com/herald-mq/herald/engine"
)

// TickMode selects how the logical clock advances (Config.TickMode): TickCommit,
// TickManual or TickInterval (every Config.TickInterval).
type TickMode = engine.TickMode

// The tick modes of `herald serve --tick`.
const (
	TickCommit   = engine.TickCommit
	TickManual   = engine.TickManual
	TickInterval = engine.TickInterval
)

// The engine's defaults for the limits of Config, under the names `herald serve` shows
// them by, so that a program configuring a server need not reach into the engine.
const (
	// DefaultStatementTimeout is what 0 means in Config.StatementTimeout.
	DefaultStatementTimeout = engine.DefaultStatementTimeout
	// DefaultMaxRowsScanned is what 0 means in Config.MaxRowsScanned.
	DefaultMaxRowsScanned = engine.DefaultMaxRowsScanned
	// DefaultMaxWatchesPerSession is what 0 means in Config.MaxWatchesPerSession.
	DefaultMaxWatchesPerSession = engine.DefaultMaxWatchesPerSession
	// DefaultMaxWatchesPerPrincipal is what 0 means in Config.MaxWatchesPerPrincipal.
	DefaultMaxWatchesPerPrincipal = engine.DefaultMaxWatchesPerPrincipal
	// DefaultMinFreeBytes is what 0 means in Config.MinFreeBytes.
	DefaultMinFreeBytes = engine.DefaultMinFreeBytes
	// DefaultMetricsMaxGroups is what 0 means in Config.MetricsMaxGroups.
	DefaultMetricsMaxGroups = delivery.DefaultMaxGroupSeries
	// DefaultStatsInterval is what 0 means in Config.StatsInterval.
	DefaultStatsInterval = engine.DefaultLayer0Interval
)
