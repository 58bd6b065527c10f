package parser_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/parser"
	"github.com/herald-mq/herald/lang/token"
)

// validScripts must parse without errors and survive the print/parse round trip.
var validScripts = []string{
	"constraint positive: j: Job => j.priority >= 0",
	"CONSTRAINT owned: t: Task, owns(a, t) => a.active = TRUE OR t.orphan",
	"constraint match: x: Job => x.n > 0",
	"DROP CONSTRAINT positive",
	"drop constraint positive",
	"constraint = WATCH j: Job RETURN j", // a handle named constraint
	"MATCH constraint: Job RETURN constraint.n",
	``,
	`;;`,
	`-- only a comment`,
	`node Job { status: String = "pending", priority: Int [required] }`,
	"node Job {\n status: String = \"pending\"\n priority: Int [required]\n}",
	`node Tagged [sealed] { tags: [String], note: String?, ids: [Int]? = [], flags: Int [required, sealed] }`,
	`node Empty {}`,
	`NODE Job { tick: Int, order: Int, watch: String, end: Timestamp? }`,
	`edge inbox(recipient: Actor, message: Message)`,
	`edge inbox(recipient: Actor, message: Message) [sealed]`,
	`edge owns(owner: Actor, thing: Thing) { since: Timestamp = now() [required] }`,
	`edge flag(x: Thing) {}`,
	`SPAWN j: Job`,
	`SPAWN j: Job { priority = 5, status = "x" }`,
	`SPAWN j: Job { priority = 5 status = "x" }`,
	`SPAWN #bob: Actor { name = "Bob" } RETURNING #bob.name AS name`,
	`SPAWN j: Job {} RETURNING j`,
	`KILL j`,
	`KILL #job_1 RETURNING #job_1.id`,
	`KILL $p`,
	`LINK inbox(#bob, m) { at = now() }`,
	`LINK inbox($who, m) RETURNING m`,
	`UNLINK inbox(#bob, m)`,
	`UNLINK inbox(#bob, m) RETURNING m`,
	`SET j.status = "done", j.n = j.n + 1`,
	`SET #j.status = "done" RETURNING #j.status`,
	`SET $node.n = -1`,
	`MATCH t: Task RETURN t`,
	`match t: Task where t.done return t`,
	`MATCH t: Task, belongs_to(t, #project_1) WHERE t.status = "open" RETURN t.title AS title ORDER BY t.priority DESC, t.title LIMIT 10 OFFSET 20`,
	`MATCH t: Task RETURN DISTINCT t.status`,
	`MATCH t: Task RETURN t ORDER BY t.a ASC`,
	`MATCH t: Task RETURN t LIMIT $n`,
	`MATCH a: Actor, r: follows(a, _), follows(_, $x) RETURN a, r`,
	`MATCH t: Task RETURN COUNT(*), COUNT(DISTINCT t.owner), COUNT(t WHERE t.status = "done"), SUM(t.n), AVG(t.n), MIN(t.n), MAX(t.n)`,
	`MATCH t: Task RETURN length(t.title), coalesce(t.a, t.b, 0), current_actor(), current_session(), now()`,
	`MATCH j: Job WHERE j.status = "pending" SET j.status = "running"`,
	`MATCH j: Job WHERE j.status = "pending" SET j.status = "running", j.at = now() KILL j LINK ran(j, #w) UNLINK queued(j, #q) SPAWN l: Log { job = j.id } RETURNING j, l`,
	`MATCH t: Task WHERE t.a = 1 OR t.b = 2 AND NOT t.c RETURN t`,
	`MATCH t: Task WHERE NOT t.a = 1 AND NOT NOT t.b RETURN t`,
	`MATCH t: Task WHERE (NOT t.a) = FALSE RETURN t`,
	`MATCH t: Task WHERE t.a = (NOT t.b) RETURN t`,
	`MATCH t: Task WHERE t.a IS NULL AND t.b IS NOT NULL RETURN t`,
	`MATCH t: Task WHERE t.a IN [1, 2, 3] RETURN t`,
	`MATCH t: Task WHERE t.a != 1 AND t.b <> 2 AND t.c < 3 AND t.d <= 4 AND t.e > 5 AND t.f >= 6 RETURN t`,
	`MATCH t: Task WHERE t.a + t.b * t.c - t.d / 2 % 3 > -t.e RETURN t`,
	`MATCH t: Task WHERE - -t.a = 1 RETURN (t.a + 1) * 2, t.at > now() - 5m, 1.5, 1e3, 2.0, 1h30m, 250ms, TRUE, false, null`,
	`MATCH t: Task WHERE t.name = "a \"quoted\" \\ \n \t \u00e9 text" RETURN t`,
	`MATCH t: Task RETURN [], [1, [2, 3]], [$a, #b, "c"]`,
	`BEGIN; SPAWN j: Job; COMMIT`,
	`BEGIN ROLLBACK`,
	`BEGIN SESSION AS #alice`,
	`BEGIN SESSION AS $actor END SESSION`,
	`TICK`,
	`TICK 5`,
	`TICK $n`,
	`WATCH t: Task RETURN t`,
	`WATCH t: Task [mode: consume] WHERE t.open [group: "g"] RETURN t`,
	`WATCH t: Task WHERE t.open [mode: consume][group: "g"] RETURN t`,
	`h = WATCH t: Task RETURN t`,
	`WATCH j: Job [mode: consume] ON MATCH DO SET j.status = "seen" KILL j`,
	`WATCH j: Job RETURN j ON MATCH DO LINK seen(j, #me) { at = now() }`,
	`WATCH j: Job [Mode: CONSUME, DELIVER_ON: TICK] RETURN j`,
	`WATCH j: Job [mode: watch, group: "g", ordering: arrival, delivery: best_effort, visibility: immediate, window: none, buffer: 10, on_full: block, ack_timeout: 30s, max_redeliveries: 5, dead_letter: #dlq, initial: none, filter: j.n > 1, branch: main, branches: all, deliver_on: commit] RETURN j`,
	`WATCH j: Job [ordering: causal, window: sliding(1m, 10s), initial: since(42), branch: "dev", on_full: error, delivery: reliable, visibility: committed] RETURN j`,
	`WATCH j: Job [ordering: attribute(j.priority DESC, j.created_at ASC, j.n), initial: full, on_full: drop, deliver_on: tick] RETURN j`,
	`WATCH j: Job [backoff: exponential(1s, 2.0, 5m), fairness: j.tenant, weight: coalesce(j.weight, 1), available_at: j.run_at, max_in_flight: 4, heartbeat: 10s] RETURN j`,
	`WATCH j: Job [backoff: exponential(1s, 2, 5m)] RETURN j`,
	`WATCH j: Job [backoff: fixed(5s)] RETURN j`,
	`WATCH j: Job [backoff: none] RETURN j`,
	`ACK "d1"`,
	`REDRIVE #dl_1`,
	`node Order { state: String }`,
	`SPAWN o: Order { state = "new" }`,
	`MATCH o: Order WHERE o.state = "new" RETURN o ORDER BY o.state`,
	`edge placed(by: Actor, order: Order)`,
	`REDRIVE "dl_1"`,
	`REDRIVE $letter`,
	`MATCH d: _DeadLetter WHERE d.failure_reason = "no_retry" REDRIVE d`,
	`MATCH d: _DeadLetter WHERE d.failure_reason = "no_retry" REDRIVE d RETURNING d.subject_id`,
	"MATCH d: _DeadLetter KILL d\nREDRIVE #dl_1",
	`ACK $d`,
	`ACK #d1`,
	`NACK "d1"`,
	`NACK $d [no_retry]`,
	`NACK #d [delay: 5s]`,
	`NACK #d [delay: 5s, no_retry]`,
	`EXTEND "d1"`,
	`EXTEND $d [by: 30s]`,
	`PAUSE WATCH #w`,
	`RESUME WATCH w`,
	`CANCEL WATCH "w1"`,
	`CANCEL WATCH $w`,
	`ALTER WATCH #w SET [buffer: 2000]`,
	`ALTER WATCH w SET [buffer: 2000] [ack_timeout: 1m, max_in_flight: 2]`,
	"SPAWN a: A\nSPAWN b: B\nLINK e(a, b)\nMATCH x: A RETURN x\nw = WATCH y: B RETURN y\nSET a.n = 1",
}

func TestValid(t *testing.T) {
	for _, src := range validScripts {
		if _, _, err := parser.ParseScript(src); err != nil {
			t.Errorf("ParseScript(%q): %v", src, err)
		}
	}
}

// sexpr renders an expression fully parenthesized, to check the tree's shape.
func sexpr(x ast.Expr) string {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.BasicLit:
		return x.Value
	case *ast.ParamRef:
		return "$" + x.Name
	case *ast.NodeRef:
		return "#" + x.Name
	case *ast.SelectorExpr:
		return sexpr(x.X) + "." + x.Sel.Name
	case *ast.UnaryExpr:
		return "(" + x.Op.String() + " " + sexpr(x.X) + ")"
	case *ast.BinaryExpr:
		return "(" + x.Op.String() + " " + sexpr(x.X) + " " + sexpr(x.Y) + ")"
	case *ast.IsNullExpr:
		if x.Not {
			return "(notnull " + sexpr(x.X) + ")"
		}
		return "(null " + sexpr(x.X) + ")"
	case *ast.ParenExpr:
		return "[" + sexpr(x.X) + "]"
	case *ast.ListLit:
		var parts []string
		for _, e := range x.Elems {
			parts = append(parts, sexpr(e))
		}
		return "{" + strings.Join(parts, " ") + "}"
	case *ast.CallExpr:
		s := x.Fun.Name + "("
		if x.Star {
			s += "*"
		}
		if x.Distinct {
			s += "distinct "
		}
		for i, a := range x.Args {
			if i > 0 {
				s += " "
			}
			s += sexpr(a)
		}
		if x.Where != nil {
			s += " where " + sexpr(x.Where)
		}
		return s + ")"
	}
	return fmt.Sprintf("%T", x)
}

func TestExprShape(t *testing.T) {
	tests := []struct{ src, want string }{
		{`a OR b AND c`, `(OR a (AND b c))`},
		{`a AND b OR c`, `(OR (AND a b) c)`},
		{`NOT a = b`, `(NOT (= a b))`},
		{`NOT a = b AND c`, `(AND (NOT (= a b)) c)`},
		{`NOT NOT a`, `(NOT (NOT a))`},
		{`a AND NOT b OR c`, `(OR (AND a (NOT b)) c)`},
		{`(NOT a) = b`, `(= [(NOT a)] b)`},
		{`a + b * c`, `(+ a (* b c))`},
		{`a - b - c`, `(- (- a b) c)`},
		{`a * b % c / d`, `(/ (% (* a b) c) d)`},
		{`-a.b + 1`, `(+ (- a.b) 1)`},
		{`- -a`, `(- (- a))`},
		{`a = b = c`, `(= (= a b) c)`},
		{`a < b + 1`, `(< a (+ b 1))`},
		{`a IN [1, 2]`, `(IN a {1 2})`},
		{`a IS NULL`, `(null a)`},
		{`a + 1 IS NOT NULL AND b`, `(AND (notnull (+ a 1)) b)`},
		{`NOT a IS NULL`, `(NOT (null a))`},
		{`a <> b`, `(!= a b)`},
		{`x.id`, `x.id`},
		{`x.order`, `x.order`},
		{`#n.attr`, `#n.attr`},
		{`COUNT(*)`, `COUNT(*)`},
		{`count(DISTINCT t.a)`, `count(distinct t.a)`},
		{`COUNT(t WHERE t.done AND t.n > 1)`, `COUNT(t where (AND t.done (> t.n 1)))`},
		{`coalesce(a, b, 1)`, `coalesce(a b 1)`},
		{`now() - 5m`, `(- now() 5m)`},
		{`true OR False`, `(OR TRUE FALSE)`},
		{`"a" = $p`, `(= "a" $p)`},
	}
	for _, tc := range tests {
		x, err := parser.ParseExpr(tc.src)
		if err != nil {
			t.Errorf("ParseExpr(%q): %v", tc.src, err)
			continue
		}
		if got := sexpr(x); got != tc.want {
			t.Errorf("ParseExpr(%q) = %s, want %s", tc.src, got, tc.want)
		}
	}
}

func TestPositions(t *testing.T) {
	src := "MATCH t: Task\nWHERE t.n >= 10\nRETURN t.n AS n ORDER BY t.n DESC LIMIT 5"
	s, file, err := parser.ParseScript(src)
	if err != nil {
		t.Fatal(err)
	}
	m := s.Stmts[0].(*ast.MatchStmt)
	if got := file.Position(m.Where.Pos()).String(); got != "2:7" {
		t.Errorf("WHERE expression at %s, want 2:7", got)
	}
	if got, want := int(m.End())-1, len(src); got != want {
		t.Errorf("statement ends at offset %d, want %d", got, want)
	}
	ast.Inspect(s, func(n ast.Node) bool {
		if n == nil {
			return true
		}
		if !n.Pos().IsValid() || n.End() < n.Pos() || int(n.End()) > len(src)+1 {
			t.Errorf("%T has bad range %d..%d", n, n.Pos(), n.End())
		}
		return true
	})
	lit := m.Limit.(*ast.BasicLit)
	if lit.Kind != token.INT || src[lit.Pos()-1:lit.End()-1] != "5" {
		t.Errorf("LIMIT literal %+v", lit)
	}
}

func TestErrorListType(t *testing.T) {
	_, _, err := parser.ParseScript("MATCH t: [x] RETURN t")
	var list parser.ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("error %v is not a one-element ErrorList", err)
	}
	if list[0].Pos.Line != 1 || list[0].Pos.Column != 10 {
		t.Errorf("error at %v, want 1:10", list[0].Pos)
	}
	if got, want := err.Error(), "1:10: expected type name, found '['"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
