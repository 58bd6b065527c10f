package herald

// Result is the outcome of one statement: the columns and rows of a MATCH, and what the
// statement did.
type Result struct {
	Columns []string  `json:"columns"`
	Rows    [][]Value `json:"rows"`
	Stats   Stats     `json:"stats"`
}

// Stats counts what a statement did.
type Stats struct {
	NodesCreated  int `json:"nodes_created,omitempty"`
	NodesDeleted  int `json:"nodes_deleted,omitempty"`
	EdgesCreated  int `json:"edges_created,omitempty"`
	EdgesDeleted  int `json:"edges_deleted,omitempty"`
	AttrsSet      int `json:"attributes_set,omitempty"`
	TypesDeclared int `json:"types_declared,omitempty"`
	// ConstraintsDeclared and ConstraintsDropped count constraint declarations and
	// DROP CONSTRAINT.
	ConstraintsDeclared int `json:"constraints_declared,omitempty"`
	ConstraintsDropped  int `json:"constraints_dropped,omitempty"`
	// RowsScanned counts candidate bindings the executor examined; an indexed lookup
	// keeps it close to the number of rows returned.
	RowsScanned int `json:"rows_scanned"`
	// Plan names how the first pattern element was read, e.g. "index Job.priority" or
	// "scan Job".
	Plan string `json:"plan,omitempty"`
}

// Response is the outcome of one request of statements: one Result per statement, and
// the position (seq, tick) of the graph after the last one.
type Response struct {
	Results []Result `json:"results"`
	Seq     uint64   `json:"seq"`
	Tick    uint64   `json:"tick"`
}

// Publication is one node to publish: a SPAWN of Type with Attrs, under ID when it is
// set.
type Publication struct {
	ID   NodeID
	Type string
	// Attrs passes to the node, which may change it (dropping nulls, converting values
	// to their declared types, adding defaults): the caller must not use it afterwards.
	Attrs map[string]Value
}

// Published is the outcome of one Publication: the node's id and the position of the
// commit that created it, or why it was refused.
type Published struct {
	ID        NodeID
	Seq, Tick uint64
	Err       error
}
