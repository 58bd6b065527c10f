// Package ast declares the syntax tree of Herald's query language. Every node records
// its source positions (Pos and End), so errors and tools can point at the text.
package ast

import "github.com/herald-mq/herald/lang/token"

// Node is any syntax tree node.
type Node interface {
	Pos() token.Pos // first character of the node
	End() token.Pos // first character after the node
}

// Expr is an expression node.
type Expr interface {
	Node
	exprNode()
}

// Stmt is a statement node.
type Stmt interface {
	Node
	stmtNode()
}

// PatternElem is one comma-separated element of a pattern: a node binding or an edge atom.
type PatternElem interface {
	Node
	patternElem()
}

// Script is the result of parsing a query text: its statements in order.
type Script struct {
	Stmts []Stmt
}

// ---------------------------------------------------------------------------
// Expressions

type (
	// BadExpr stands for an expression with syntax errors.
	BadExpr struct {
		From, To token.Pos
	}

	// Ident is a name: a variable, attribute, type, function, or an option word.
	// The anonymous endpoint `_` is an Ident named "_".
	Ident struct {
		NamePos token.Pos
		Name    string
	}

	// BasicLit is a literal: INT, FLOAT, STRING, DURATION, TRUE, FALSE or NULL.
	// Value holds the source text (for STRING, with quotes).
	BasicLit struct {
		ValuePos token.Pos
		Kind     token.Token
		Value    string
	}

	// ParamRef is a query parameter `$name`.
	ParamRef struct {
		DollarPos token.Pos
		Name      string // without the `$`
	}

	// NodeRef is a node or handle reference `#name`.
	NodeRef struct {
		HashPos token.Pos
		Name    string // without the `#`
	}

	// ListLit is a list literal `[a, b, c]`.
	ListLit struct {
		Lbrack token.Pos
		Elems  []Expr
		Rbrack token.Pos
	}

	// SelectorExpr is an attribute access `x.attr`.
	SelectorExpr struct {
		X   Expr
		Sel *Ident
	}

	// CallExpr is a function or aggregate call: `now()`, `COUNT(t)`, `COUNT(*)`,
	// `COUNT(t WHERE t.done)`, and call-shaped option values such as `tumbling(10s)`.
	CallExpr struct {
		Fun      *Ident
		Lparen   token.Pos
		Distinct bool // COUNT(DISTINCT x)
		Star     bool // COUNT(*)
		Args     []Expr
		Where    Expr // filter of an aggregate, or nil
		Rparen   token.Pos
	}

	// UnaryExpr is `NOT x` or `-x`.
	UnaryExpr struct {
		OpPos token.Pos
		Op    token.Token // NOT or SUB
		X     Expr
	}

	// BinaryExpr is `x op y` for arithmetic, comparison, AND, OR and IN.
	BinaryExpr struct {
		X     Expr
		OpPos token.Pos
		Op    token.Token
		Y     Expr
	}

	// IsNullExpr is `x IS NULL` or `x IS NOT NULL`.
	IsNullExpr struct {
		X    Expr
		Not  bool
		Null token.Pos // position of NULL
	}

	// ParenExpr is a parenthesized expression.
	ParenExpr struct {
		Lparen token.Pos
		X      Expr
		Rparen token.Pos
	}

	// OrderingExpr is the watch option value `attribute(e1 DESC, e2 ASC)`.
	OrderingExpr struct {
		Attribute token.Pos
		Lparen    token.Pos
		Keys      []*OrderItem
		Rparen    token.Pos
	}
)

func (x *BadExpr) Pos() token.Pos      { return x.From }
func (x *Ident) Pos() token.Pos        { return x.NamePos }
func (x *BasicLit) Pos() token.Pos     { return x.ValuePos }
func (x *ParamRef) Pos() token.Pos     { return x.DollarPos }
func (x *NodeRef) Pos() token.Pos      { return x.HashPos }
func (x *ListLit) Pos() token.Pos      { return x.Lbrack }
func (x *SelectorExpr) Pos() token.Pos { return x.X.Pos() }
func (x *CallExpr) Pos() token.Pos     { return x.Fun.Pos() }
func (x *UnaryExpr) Pos() token.Pos    { return x.OpPos }
func (x *BinaryExpr) Pos() token.Pos   { return x.X.Pos() }
func (x *IsNullExpr) Pos() token.Pos   { return x.X.Pos() }
func (x *ParenExpr) Pos() token.Pos    { return x.Lparen }
func (x *OrderingExpr) Pos() token.Pos { return x.Attribute }

func (x *BadExpr) End() token.Pos      { return x.To }
func (x *Ident) End() token.Pos        { return x.NamePos + token.Pos(len(x.Name)) }
func (x *BasicLit) End() token.Pos     { return x.ValuePos + token.Pos(len(x.Value)) }
func (x *ParamRef) End() token.Pos     { return x.DollarPos + token.Pos(1+len(x.Name)) }
func (x *NodeRef) End() token.Pos      { return x.HashPos + token.Pos(1+len(x.Name)) }
func (x *ListLit) End() token.Pos      { return x.Rbrack + 1 }
func (x *SelectorExpr) End() token.Pos { return x.Sel.End() }
func (x *CallExpr) End() token.Pos     { return x.Rparen + 1 }
func (x *UnaryExpr) End() token.Pos    { return x.X.End() }
func (x *BinaryExpr) End() token.Pos   { return x.Y.End() }
func (x *IsNullExpr) End() token.Pos   { return x.Null + 4 }
func (x *ParenExpr) End() token.Pos    { return x.Rparen + 1 }
func (x *OrderingExpr) End() token.Pos { return x.Rparen + 1 }

func (*BadExpr) exprNode()      {}
func (*Ident) exprNode()        {}
func (*BasicLit) exprNode()     {}
func (*ParamRef) exprNode()     {}
func (*NodeRef) exprNode()      {}
func (*ListLit) exprNode()      {}
func (*SelectorExpr) exprNode() {}
func (*CallExpr) exprNode()     {}
func (*UnaryExpr) exprNode()    {}
func (*BinaryExpr) exprNode()   {}
func (*IsNullExpr) exprNode()   {}
func (*ParenExpr) exprNode()    {}
func (*OrderingExpr) exprNode() {}

// ---------------------------------------------------------------------------
// Patterns, projections, assignments

type (
	// Pattern is a comma-separated list of node bindings and edge atoms.
	Pattern struct {
		Elems []PatternElem
	}

	// NodePattern binds a variable to nodes of a type: `t: Task`.
	NodePattern struct {
		Var   *Ident
		Colon token.Pos
		Type  *Ident
	}

	// EdgePattern is an edge atom `belongs_to(t, #project_1)`, optionally bound to a
	// variable: `r: belongs_to(t, p)`. Arguments are variables (Ident), `_` (Ident "_"),
	// node references (NodeRef) or parameters (ParamRef).
	EdgePattern struct {
		Var    *Ident // nil when unbound
		Colon  token.Pos
		Type   *Ident
		Lparen token.Pos
		Args   []Expr
		Rparen token.Pos
	}

	// ReturnClause is `RETURN items` (or `RETURNING items` after a mutation).
	ReturnClause struct {
		Return    token.Pos
		Returning bool // spelled RETURNING
		Distinct  bool
		Items     []*ReturnItem
	}

	// ReturnItem is one projected expression with an optional alias.
	ReturnItem struct {
		X     Expr
		Alias *Ident // nil without AS
	}

	// OrderItem is `expr [ASC|DESC]`, in ORDER BY and in attribute(...) orderings.
	OrderItem struct {
		X      Expr
		DirPos token.Pos   // NoPos when no direction was written
		Dir    token.Token // ASC, DESC, or ILLEGAL when absent (ascending)
	}

	// Assign is `name = expr` in SPAWN/LINK bodies, or `x.attr = expr` in SET.
	Assign struct {
		Target Expr // *Ident in bodies, *SelectorExpr in SET
		Eq     token.Pos
		Value  Expr
	}

	// Body is a brace-enclosed list of assignments `{ a = 1, b = 2 }`.
	Body struct {
		Lbrace  token.Pos
		Assigns []*Assign
		Rbrace  token.Pos
	}

	// Modifiers is a bracketed list of words such as `[required]` or `[sealed]`.
	Modifiers struct {
		Lbrack token.Pos
		Words  []*Ident
		Rbrack token.Pos
	}

	// TypeRef is an attribute type: `String`, `Int?`, `[String]` (list of String).
	TypeRef struct {
		Lbrack   token.Pos // valid for list types
		Name     *Ident
		Rbrack   token.Pos
		Optional bool      // trailing `?`
		Quest    token.Pos // position of `?`
	}

	// AttrDecl declares one attribute: `name: Type [= default] [modifiers]`.
	AttrDecl struct {
		Name    *Ident
		Colon   token.Pos
		Type    *TypeRef
		Default Expr // nil when absent
		Mods    *Modifiers
	}

	// EndpointDecl declares one endpoint of an edge type: `recipient: Actor`.
	EndpointDecl struct {
		Name  *Ident
		Colon token.Pos
		Type  *Ident
	}

	// WatchOption is one `name: value` (or bare flag `no_retry`) inside `[...]`.
	// Values are expressions: words are Idents, `tumbling(10s)` is a CallExpr,
	// `attribute(...)` is an OrderingExpr. Value is nil for a bare flag.
	WatchOption struct {
		Name  *Ident
		Colon token.Pos
		Value Expr
	}

	// OptionList is one bracketed option group `[a: 1, b: 2]`.
	OptionList struct {
		Lbrack  token.Pos
		Options []*WatchOption
		Rbrack  token.Pos
	}
)

func (p *Pattern) Pos() token.Pos {
	if len(p.Elems) == 0 {
		return token.NoPos
	}
	return p.Elems[0].Pos()
}
func (p *Pattern) End() token.Pos {
	if len(p.Elems) == 0 {
		return token.NoPos
	}
	return p.Elems[len(p.Elems)-1].End()
}
func (p *NodePattern) Pos() token.Pos { return p.Var.Pos() }
func (p *NodePattern) End() token.Pos { return p.Type.End() }
func (p *EdgePattern) Pos() token.Pos {
	if p.Var != nil {
		return p.Var.Pos()
	}
	return p.Type.Pos()
}
func (p *EdgePattern) End() token.Pos { return p.Rparen + 1 }
func (*NodePattern) patternElem()     {}
func (*EdgePattern) patternElem()     {}

func (r *ReturnClause) Pos() token.Pos { return r.Return }
func (r *ReturnClause) End() token.Pos {
	if len(r.Items) == 0 {
		return r.Return + 6
	}
	return r.Items[len(r.Items)-1].End()
}
func (r *ReturnItem) Pos() token.Pos { return r.X.Pos() }
func (r *ReturnItem) End() token.Pos {
	if r.Alias != nil {
		return r.Alias.End()
	}
	return r.X.End()
}
func (o *OrderItem) Pos() token.Pos { return o.X.Pos() }
func (o *OrderItem) End() token.Pos {
	if o.DirPos.IsValid() {
		return o.DirPos + token.Pos(len(o.Dir.String()))
	}
	return o.X.End()
}
func (a *Assign) Pos() token.Pos    { return a.Target.Pos() }
func (a *Assign) End() token.Pos    { return a.Value.End() }
func (b *Body) Pos() token.Pos      { return b.Lbrace }
func (b *Body) End() token.Pos      { return b.Rbrace + 1 }
func (m *Modifiers) Pos() token.Pos { return m.Lbrack }
func (m *Modifiers) End() token.Pos { return m.Rbrack + 1 }
func (t *TypeRef) Pos() token.Pos {
	if t.Lbrack.IsValid() {
		return t.Lbrack
	}
	return t.Name.Pos()
}
func (t *TypeRef) End() token.Pos {
	switch {
	case t.Optional:
		return t.Quest + 1
	case t.Rbrack.IsValid():
		return t.Rbrack + 1
	}
	return t.Name.End()
}
func (a *AttrDecl) Pos() token.Pos { return a.Name.Pos() }
func (a *AttrDecl) End() token.Pos {
	switch {
	case a.Mods != nil:
		return a.Mods.End()
	case a.Default != nil:
		return a.Default.End()
	}
	return a.Type.End()
}
func (e *EndpointDecl) Pos() token.Pos { return e.Name.Pos() }
func (e *EndpointDecl) End() token.Pos { return e.Type.End() }
func (o *WatchOption) Pos() token.Pos  { return o.Name.Pos() }
func (o *WatchOption) End() token.Pos {
	if o.Value != nil {
		return o.Value.End()
	}
	return o.Name.End()
}
func (l *OptionList) Pos() token.Pos { return l.Lbrack }
func (l *OptionList) End() token.Pos { return l.Rbrack + 1 }

// ---------------------------------------------------------------------------
// Statements

type (
	// BadStmt stands for a statement with syntax errors.
	BadStmt struct {
		From, To token.Pos
	}

	// NodeDeclStmt declares a node type: `node Job [sealed] { status: String = "pending" }`.
	NodeDeclStmt struct {
		Node   token.Pos
		Name   *Ident
		Mods   *Modifiers // nil when absent
		Lbrace token.Pos
		Attrs  []*AttrDecl
		Rbrace token.Pos
	}

	// EdgeDeclStmt declares an edge type:
	// `edge inbox(recipient: Actor, message: Message) [mods] { attrs }`.
	EdgeDeclStmt struct {
		Edge      token.Pos
		Name      *Ident
		Lparen    token.Pos
		Endpoints []*EndpointDecl
		Rparen    token.Pos
		Mods      *Modifiers // nil when absent
		Lbrace    token.Pos  // NoPos when there is no attribute body
		Attrs     []*AttrDecl
		Rbrace    token.Pos
	}

	// SpawnStmt creates a node: `SPAWN j: Job { priority = 5 }` binds j to a node with a
	// generated id; `SPAWN #bob: Actor { ... }` gives the id explicitly.
	SpawnStmt struct {
		Spawn     token.Pos
		Var       *Ident   // nil when the id is given with ID
		ID        *NodeRef // nil for a generated id
		Colon     token.Pos
		Type      *Ident
		Body      *Body // nil when absent
		Returning *ReturnClause
	}

	// KillStmt deletes a node and its incident edges: `KILL j`, `KILL #job_1`.
	KillStmt struct {
		Kill      token.Pos
		Target    Expr // Ident, NodeRef or ParamRef
		Returning *ReturnClause
	}

	// LinkStmt creates (or updates) an edge: `LINK inbox(#bob, m) { at = now() }`.
	LinkStmt struct {
		Link      token.Pos
		Edge      *EdgePattern
		Body      *Body // nil when absent
		Returning *ReturnClause
	}

	// UnlinkStmt deletes an edge: `UNLINK inbox(#bob, m)`.
	UnlinkStmt struct {
		Unlink    token.Pos
		Edge      *EdgePattern
		Returning *ReturnClause
	}

	// SetStmt assigns attributes: `SET j.status = "done", j.done_at = now()`.
	SetStmt struct {
		Set       token.Pos
		Assigns   []*Assign
		Returning *ReturnClause
	}

	// MatchStmt is a query `MATCH p [WHERE e] RETURN ... [ORDER BY ...] [LIMIT n [OFFSET m]]`
	// or, when Actions is non-empty, a compound `MATCH p [WHERE e] SET/KILL/LINK/UNLINK ...
	// [RETURNING ...]` applied to every match.
	MatchStmt struct {
		Match   token.Pos
		Pattern *Pattern
		Where   Expr // nil when absent
		Return  *ReturnClause
		OrderBy []*OrderItem
		Limit   Expr
		Offset  Expr
		Actions []Stmt // SetStmt, KillStmt, LinkStmt, UnlinkStmt, SpawnStmt, RedriveStmt
		EndPos  token.Pos
	}

	// BeginStmt is `BEGIN`.
	BeginStmt struct{ Begin token.Pos }
	// CommitStmt is `COMMIT`.
	CommitStmt struct{ Commit token.Pos }
	// RollbackStmt is `ROLLBACK`.
	RollbackStmt struct{ Rollback token.Pos }

	// BeginSessionStmt is `BEGIN SESSION AS #actor`.
	BeginSessionStmt struct {
		Begin token.Pos
		Actor Expr // NodeRef or ParamRef
	}

	// EndSessionStmt is `END SESSION`.
	EndSessionStmt struct {
		EndPos  token.Pos
		Session token.Pos
	}

	// TickStmt is `TICK [n]`.
	TickStmt struct {
		Tick  token.Pos
		Count Expr // nil means 1
	}

	// WatchStmt registers a standing query:
	// `[h =] WATCH p [WHERE e] [options...] [RETURN ...] [ON MATCH DO actions]`.
	// Option groups may stand before or after WHERE; Options keeps them in source order.
	WatchStmt struct {
		Handle  *Ident // `h = WATCH ...`, nil when unbound
		Watch   token.Pos
		Pattern *Pattern
		Where   Expr
		Options []*OptionList
		Return  *ReturnClause
		OnMatch *OnMatch // nil when absent
	}

	// OnMatch is a server-side trigger `ON MATCH DO action+`.
	OnMatch struct {
		On      token.Pos
		Actions []Stmt // SetStmt, KillStmt, LinkStmt, UnlinkStmt, SpawnStmt, RedriveStmt
	}

	// AckStmt is `ACK id`. The id is a STRING BasicLit, a ParamRef or a NodeRef.
	AckStmt struct {
		Ack token.Pos
		ID  Expr
	}

	// RedriveStmt is `REDRIVE id`: re-spawn the node a dead letter holds. The id names
	// the _DeadLetter node (NodeRef, STRING BasicLit or ParamRef). As an action of a
	// MATCH (`MATCH d: _DeadLetter WHERE … REDRIVE d`) the id is the Ident of a variable
	// the pattern binds, and every letter it binds is redriven.
	RedriveStmt struct {
		Redrive token.Pos
		ID      Expr
	}

	// NackStmt is `NACK id`, `NACK id [no_retry]` or `NACK id [delay: 5s]`.
	NackStmt struct {
		Nack    token.Pos
		ID      Expr
		Options *OptionList // nil when absent
	}

	// ExtendStmt is `EXTEND id [by: 30s]`.
	ExtendStmt struct {
		Extend  token.Pos
		ID      Expr
		Options *OptionList // nil when absent
	}

	// WatchControlStmt is `PAUSE WATCH h`, `RESUME WATCH h` or `CANCEL WATCH h`.
	WatchControlStmt struct {
		OpPos  token.Pos
		Op     token.Token // PAUSE, RESUME or CANCEL
		Handle Expr        // NodeRef, Ident, STRING BasicLit or ParamRef
	}

	// AlterWatchStmt is `ALTER WATCH h SET [options]...`.
	AlterWatchStmt struct {
		Alter   token.Pos
		Handle  Expr
		Options []*OptionList
	}

	// ConstraintDeclStmt is `constraint name: pattern => condition`: every binding of
	// the pattern must satisfy the condition after every commit. "constraint" is a
	// keyword only at the start of a statement.
	ConstraintDeclStmt struct {
		Constraint token.Pos // position of "constraint"
		Name       *Ident
		Colon      token.Pos
		Pattern    *Pattern
		Arrow      token.Pos // position of "=>"
		Cond       Expr
	}

	// DropConstraintStmt is `DROP CONSTRAINT name`. Both words are keywords only at the
	// start of a statement.
	DropConstraintStmt struct {
		Drop token.Pos
		Name *Ident
	}
)

func (s *BadStmt) Pos() token.Pos          { return s.From }
func (s *NodeDeclStmt) Pos() token.Pos     { return s.Node }
func (s *EdgeDeclStmt) Pos() token.Pos     { return s.Edge }
func (s *SpawnStmt) Pos() token.Pos        { return s.Spawn }
func (s *KillStmt) Pos() token.Pos         { return s.Kill }
func (s *LinkStmt) Pos() token.Pos         { return s.Link }
func (s *UnlinkStmt) Pos() token.Pos       { return s.Unlink }
func (s *SetStmt) Pos() token.Pos          { return s.Set }
func (s *MatchStmt) Pos() token.Pos        { return s.Match }
func (s *BeginStmt) Pos() token.Pos        { return s.Begin }
func (s *CommitStmt) Pos() token.Pos       { return s.Commit }
func (s *RollbackStmt) Pos() token.Pos     { return s.Rollback }
func (s *BeginSessionStmt) Pos() token.Pos { return s.Begin }
func (s *EndSessionStmt) Pos() token.Pos   { return s.EndPos }
func (s *TickStmt) Pos() token.Pos         { return s.Tick }
func (s *WatchStmt) Pos() token.Pos {
	if s.Handle != nil {
		return s.Handle.Pos()
	}
	return s.Watch
}
func (s *AckStmt) Pos() token.Pos            { return s.Ack }
func (s *RedriveStmt) Pos() token.Pos        { return s.Redrive }
func (s *NackStmt) Pos() token.Pos           { return s.Nack }
func (s *ExtendStmt) Pos() token.Pos         { return s.Extend }
func (s *WatchControlStmt) Pos() token.Pos   { return s.OpPos }
func (s *AlterWatchStmt) Pos() token.Pos     { return s.Alter }
func (o *OnMatch) Pos() token.Pos            { return o.On }
func (s *ConstraintDeclStmt) Pos() token.Pos { return s.Constraint }
func (s *DropConstraintStmt) Pos() token.Pos { return s.Drop }

func (s *BadStmt) End() token.Pos { return s.To }
func (s *NodeDeclStmt) End() token.Pos {
	return s.Rbrace + 1
}
func (s *EdgeDeclStmt) End() token.Pos {
	switch {
	case s.Lbrace.IsValid():
		return s.Rbrace + 1
	case s.Mods != nil:
		return s.Mods.End()
	}
	return s.Rparen + 1
}
func (s *SpawnStmt) End() token.Pos {
	switch {
	case s.Returning != nil:
		return s.Returning.End()
	case s.Body != nil:
		return s.Body.End()
	}
	return s.Type.End()
}
func (s *KillStmt) End() token.Pos {
	if s.Returning != nil {
		return s.Returning.End()
	}
	return s.Target.End()
}
func (s *LinkStmt) End() token.Pos {
	switch {
	case s.Returning != nil:
		return s.Returning.End()
	case s.Body != nil:
		return s.Body.End()
	}
	return s.Edge.End()
}
func (s *UnlinkStmt) End() token.Pos {
	if s.Returning != nil {
		return s.Returning.End()
	}
	return s.Edge.End()
}
func (s *SetStmt) End() token.Pos {
	if s.Returning != nil {
		return s.Returning.End()
	}
	if len(s.Assigns) == 0 {
		return s.Set + 3
	}
	return s.Assigns[len(s.Assigns)-1].End()
}
func (s *MatchStmt) End() token.Pos        { return s.EndPos }
func (s *BeginStmt) End() token.Pos        { return s.Begin + 5 }
func (s *CommitStmt) End() token.Pos       { return s.Commit + 6 }
func (s *RollbackStmt) End() token.Pos     { return s.Rollback + 8 }
func (s *BeginSessionStmt) End() token.Pos { return s.Actor.End() }
func (s *EndSessionStmt) End() token.Pos   { return s.Session + 7 }
func (s *TickStmt) End() token.Pos {
	if s.Count != nil {
		return s.Count.End()
	}
	return s.Tick + 4
}
func (s *WatchStmt) End() token.Pos {
	switch {
	case s.OnMatch != nil:
		return s.OnMatch.End()
	case s.Return != nil:
		return s.Return.End()
	case len(s.Options) > 0 && (s.Where == nil || s.Options[len(s.Options)-1].Pos() > s.Where.Pos()):
		return s.Options[len(s.Options)-1].End()
	case s.Where != nil:
		return s.Where.End()
	}
	return s.Pattern.End()
}
func (o *OnMatch) End() token.Pos {
	if len(o.Actions) == 0 {
		return o.On + 2
	}
	return o.Actions[len(o.Actions)-1].End()
}
func (s *AckStmt) End() token.Pos     { return s.ID.End() }
func (s *RedriveStmt) End() token.Pos { return s.ID.End() }
func (s *NackStmt) End() token.Pos {
	if s.Options != nil {
		return s.Options.End()
	}
	return s.ID.End()
}
func (s *ExtendStmt) End() token.Pos {
	if s.Options != nil {
		return s.Options.End()
	}
	return s.ID.End()
}
func (s *WatchControlStmt) End() token.Pos { return s.Handle.End() }
func (s *ConstraintDeclStmt) End() token.Pos {
	if s.Cond != nil {
		return s.Cond.End()
	}
	return s.Arrow + 2
}
func (s *DropConstraintStmt) End() token.Pos { return s.Name.End() }
func (s *AlterWatchStmt) End() token.Pos {
	if len(s.Options) == 0 {
		return s.Handle.End()
	}
	return s.Options[len(s.Options)-1].End()
}

func (*BadStmt) stmtNode()            {}
func (*NodeDeclStmt) stmtNode()       {}
func (*EdgeDeclStmt) stmtNode()       {}
func (*SpawnStmt) stmtNode()          {}
func (*KillStmt) stmtNode()           {}
func (*LinkStmt) stmtNode()           {}
func (*UnlinkStmt) stmtNode()         {}
func (*SetStmt) stmtNode()            {}
func (*MatchStmt) stmtNode()          {}
func (*BeginStmt) stmtNode()          {}
func (*CommitStmt) stmtNode()         {}
func (*RollbackStmt) stmtNode()       {}
func (*BeginSessionStmt) stmtNode()   {}
func (*EndSessionStmt) stmtNode()     {}
func (*TickStmt) stmtNode()           {}
func (*WatchStmt) stmtNode()          {}
func (*AckStmt) stmtNode()            {}
func (*RedriveStmt) stmtNode()        {}
func (*NackStmt) stmtNode()           {}
func (*ExtendStmt) stmtNode()         {}
func (*WatchControlStmt) stmtNode()   {}
func (*AlterWatchStmt) stmtNode()     {}
func (*ConstraintDeclStmt) stmtNode() {}
func (*DropConstraintStmt) stmtNode() {}

// IsMutation reports whether s changes the graph when executed on its own.
func IsMutation(s Stmt) bool {
	switch s := s.(type) {
	case *NodeDeclStmt, *EdgeDeclStmt, *SpawnStmt, *KillStmt, *LinkStmt, *UnlinkStmt, *SetStmt,
		*ConstraintDeclStmt, *DropConstraintStmt:
		return true
	case *MatchStmt:
		return len(s.Actions) > 0
	}
	return false
}
