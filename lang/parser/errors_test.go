package parser_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/herald-mq/herald/lang/parser"
)

// invalidScripts each produce exactly one error, at the given position, whose message
// contains msg.
var invalidScripts = []struct {
	src, pos, msg string
}{
	{`MATCH t: [x] RETURN t`, "1:10", "expected type name, found '['"},
	{`MATCH t: Task`, "1:14", "expected WHERE, RETURN or an action (SET, KILL, LINK, UNLINK, SPAWN, REDRIVE), found end of input"},
	{`MATCH t: Task WHERE RETURN t`, "1:21", "expected expression, found 'RETURN'"},
	{`MATCH t: Task RETURN`, "1:21", "expected expression, found end of input"},
	{`MATCH t: Task RETURN t ORDER t.a`, "1:30", "expected 'BY', found 't'"},
	{`MATCH t Task RETURN t`, "1:9", "expected ':', found 'Task'"},
	{`MATCH 5 RETURN t`, "1:7", "expected node binding (v: Type) or edge atom (e(x, y)), found '5'"},
	{`MATCH e(x, 1) RETURN x`, "1:12", "expected endpoint (variable, '_', node reference or parameter), found '1'"},
	{`MATCH t: Task RETURN t AS 5`, "1:27", "expected identifier, found '5'"},
	{`MATCH t: Task RETURN (t.a`, "1:26", "expected ')', found end of input"},
	{`MATCH t: Task WHERE t.a = NOT t.b RETURN t`, "1:27", "NOT must be parenthesized"},
	{`MATCH t: Task WHERE t.a IS 5 RETURN t`, "1:28", "expected NULL, found '5'"},
	{`MATCH t: Task RETURN f(*)`, "1:24", "'*' is only allowed in COUNT(*)"},
	{`MATCH t: Task RETURN f(DISTINCT t)`, "1:24", "DISTINCT is only allowed in aggregates"},
	{`MATCH t: Task RETURN length(t WHERE t.a)`, "1:31", "WHERE inside a call is only allowed in an aggregate"},
	{`MATCH t: Task RETURN t t`, "1:24", "expected ';' or a new statement, found 't'"},
	{`RETURN t`, "1:1", "expected statement, found 'RETURN'"},
	{`constraint c j: Job => j.a > 0`, "1:14", "expected ':', found 'j'"},
	{`constraint c: j: Job j.a > 0`, "1:22", "expected '=>', found 'j'"},
	{`constraint c: j: Job =>`, "1:24", "expected expression, found end of input"},
	{`DROP c`, "1:6", "expected 'CONSTRAINT', found 'c'"},
	{`drop constraint 5`, "1:17", "expected constraint name, found '5'"},
	{`foo`, "1:1", "expected statement, found 'foo'"},
	{`w = MATCH t: T RETURN t`, "1:5", "expected 'WATCH', found 'MATCH'"},
	{`node { a: Int }`, "1:6", "expected type name, found '{'"},
	{`node J { a Int }`, "1:12", "expected ':', found 'Int'"},
	{`node J { a: 5 }`, "1:13", "expected type name, found '5'"},
	{`node J { a: [Int }`, "1:18", "expected ']', found '}'"},
	{`node J { a: Int [] }`, "1:18", "expected modifier, found ']'"},
	{`node J { a: Int, 5 }`, "1:18", "expected attribute name or '}', found '5'"},
	{`node J`, "1:7", "expected '{', found end of input"},
	{`edge e() {}`, "1:8", "expected endpoint name, found ')'"},
	{`edge e(a Actor)`, "1:10", "expected ':', found 'Actor'"},
	{`SPAWN Job`, "1:10", "expected ':', found end of input"},
	{`SPAWN 5: Job`, "1:7", "expected variable or node reference, found '5'"},
	{`SPAWN j: Job { a: 1 }`, "1:17", "expected '=', found ':'"},
	{`SPAWN j: Job { a = }`, "1:20", "expected expression, found '}'"},
	{`SPAWN j: Job RETURNING`, "1:23", "expected expression, found end of input"},
	{`KILL "x"`, "1:6", "expected variable, node reference or parameter, found \"x\""},
	{`LINK e(a, b`, "1:12", "expected ')', found end of input"},
	{`LINK 5`, "1:6", "expected edge type, found '5'"},
	{`UNLINK e`, "1:9", "expected '(', found end of input"},
	{`SET x = 1`, "1:7", "expected '.', found '='"},
	{`SET x.a 1`, "1:9", "expected '=', found '1'"},
	{`SET 5 = 1`, "1:5", "expected attribute reference such as x.attr, found '5'"},
	{`BEGIN SESSION #a`, "1:15", "expected 'AS', found '#a'"},
	{`BEGIN SESSION AS bob`, "1:18", "expected node reference or parameter, found 'bob'"},
	{`END`, "1:4", "expected 'SESSION', found end of input"},
	{`WATCH t: Task`, "1:14", "expected WHERE, '[', RETURN or ON MATCH DO, found end of input"},
	{`WATCH t: Task WHERE t.a`, "1:24", "expected '[', RETURN or ON MATCH DO, found end of input"},
	{`WATCH t: Task WHERE t.a WHERE t.b RETURN t`, "1:25", "expected '[', RETURN or ON MATCH DO, found 'WHERE'"},
	{`WATCH t: Task [] RETURN t`, "1:16", "expected option name, found ']'"},
	{`WATCH t: Task [mode consume] RETURN t`, "1:21", "expected ':', found 'consume'"},
	{`WATCH t: Task [colour: red] RETURN t`, "1:16", "unknown option 'colour'"},
	{`WATCH t: Task [mode: fast] RETURN t`, "1:22", "expected 'watch' or 'consume', found 'fast'"},
	{`WATCH t: Task [mode: consume, mode: watch] RETURN t`, "1:31", "option 'mode' given more than once"},
	{`WATCH t: Task [mode: consume] WHERE t.a [MODE: watch] RETURN t`, "1:42", "option 'mode' given more than once"},
	{`WATCH t: Task [group: workers] RETURN t`, "1:23", "expected string, found 'workers'"},
	{`WATCH t: Task [ordering: priority] RETURN t`, "1:26", "expected 'arrival', 'causal' or 'attribute(...)', found 'priority'"},
	{`WATCH t: Task [ordering: attribute()] RETURN t`, "1:36", "expected expression, found ')'"},
	{`WATCH t: Task [delivery: always] RETURN t`, "1:26", "expected 'best_effort' or 'reliable'"},
	{`WATCH t: Task [visibility: now] RETURN t`, "1:28", "expected 'committed' or 'immediate'"},
	{`WATCH t: Task [window: tumbling(10)] RETURN t`, "1:33", "expected duration (such as 30s), found '10'"},
	{`WATCH t: Task [window: sliding(10s)] RETURN t`, "1:35", "expected ',', found ')'"},
	{`WATCH t: Task [window: hopping(1s)] RETURN t`, "1:24", "expected 'none', 'tumbling(duration)' or 'sliding(duration, duration)'"},
	{`WATCH t: Task [buffer: 1.5] RETURN t`, "1:24", "expected integer, found '1.5'"},
	{`WATCH t: Task [on_full: wait] RETURN t`, "1:25", "expected 'drop', 'block' or 'error', found 'wait'"},
	{`WATCH t: Task [ack_timeout: 30] RETURN t`, "1:29", "expected duration (such as 30s), found '30'"},
	{`WATCH t: Task [max_redeliveries: "3"] RETURN t`, "1:34", "expected integer, found \"3\""},
	{`WATCH t: Task [dead_letter: dlq] RETURN t`, "1:29", "expected node reference (#name), found 'dlq'"},
	{`WATCH t: Task [initial: since(5s)] RETURN t`, "1:31", "expected integer, found '5s'"},
	{`WATCH t: Task [initial: some] RETURN t`, "1:25", "expected 'full', 'none' or 'since(tick)'"},
	{`WATCH t: Task [filter: ] RETURN t`, "1:24", "expected expression, found ']'"},
	{`WATCH t: Task [branch: 5] RETURN t`, "1:24", "expected branch name (identifier or string), found '5'"},
	{`WATCH t: Task [branches: some] RETURN t`, "1:26", "expected 'all', found 'some'"},
	{`WATCH t: Task [deliver_on: flush] RETURN t`, "1:28", "expected 'tick' or 'commit', found 'flush'"},
	{`WATCH t: Task [backoff: exponential(1s, 2.0)] RETURN t`, "1:44", "expected ',', found ')'"},
	{`WATCH t: Task [backoff: exponential(1s, 2s, 5m)] RETURN t`, "1:41", "expected float or integer, found '2s'"},
	{`WATCH t: Task [backoff: linear(1s)] RETURN t`, "1:25", "expected 'none', 'fixed(duration)' or 'exponential(initial, factor, max)'"},
	{`WATCH t: Task [max_in_flight: many] RETURN t`, "1:31", "expected integer, found 'many'"},
	{`WATCH t: Task [heartbeat: 5] RETURN t`, "1:27", "expected duration (such as 30s), found '5'"},
	{`WATCH t: Task [mode: consume RETURN t`, "1:30", "expected ',' or ']', found 'RETURN'"},
	{`WATCH t: Task ON MATCH RETURN t`, "1:24", "expected 'DO', found 'RETURN'"},
	{`WATCH t: Task ON MATCH DO RETURN t`, "1:27", "expected action (SET, KILL, LINK, UNLINK or SPAWN), found 'RETURN'"},
	{`WATCH t: Task ON MATCH DO KILL t RETURNING t`, "1:34", "expected ';' or a new statement, found 'RETURNING'"},
	{`ACK d1`, "1:5", "expected delivery id (string, parameter or node reference), found 'd1'"},
	{`NACK "d" [retry]`, "1:11", "unknown option 'retry'"},
	{`NACK "d" [no_retry: true]`, "1:19", "option 'no_retry' takes no value"},
	{`NACK "d" [delay: 5]`, "1:18", "expected duration (such as 30s), found '5'"},
	{`NACK "d" [mode: consume]`, "1:11", "unknown option 'mode'"},
	{`EXTEND "d" [by: 30]`, "1:17", "expected duration (such as 30s), found '30'"},
	{`EXTEND "d" [delay: 30s]`, "1:13", "unknown option 'delay'"},
	{`PAUSE w`, "1:7", "expected 'WATCH', found 'w'"},
	{`PAUSE WATCH 5`, "1:13", "expected watch handle (node reference, identifier, string or parameter), found '5'"},
	{`ALTER WATCH #w [buffer: 1]`, "1:16", "expected 'SET', found '['"},
	{`ALTER WATCH #w SET buffer`, "1:20", "expected '[', found 'buffer'"},
	{`ALTER WATCH #w SET [buffer: x]`, "1:29", "expected integer, found 'x'"},
	{`TICK 5 5`, "1:8", "expected ';' or a new statement, found '5'"},

	// Lexical errors.
	{`MATCH t: Task WHERE t.a = "open RETURN t`, "1:27", "string literal not terminated"},
	{`MATCH t: Task WHERE t.a = "\q" RETURN t`, "1:28", "unknown escape sequence"},
	{`MATCH t: Task WHERE t.a = "\u12" RETURN t`, "1:28", "escape sequence needs 4 hexadecimal digits"},
	{`MATCH t: Task WHERE t.a = "\ud800" RETURN t`, "1:28", "invalid Unicode code point"},
	{`MATCH t: Task WHERE t.a = 5min RETURN t`, "1:28", "unknown duration unit \"min\""},
	{`MATCH t: Task WHERE t.a = 1e5x RETURN t`, "1:27", "bad number literal \"1e5x\""},
	{`MATCH t: Task WHERE t.a = 1_000 RETURN t`, "1:27", "bad number literal"},
	{`MATCH t: Task WHERE t.a = 1h30 RETURN t`, "1:27", "bad duration literal \"1h30\""},
	{`MATCH t: Task WHERE t.a ! t.b RETURN t`, "1:25", "illegal character '!'"},
	{`MATCH t: Task WHERE t.a = @ RETURN t`, "1:27", "illegal character U+0040 '@'"},
	{`KILL $`, "1:6", "expected parameter name after '$'"},
	{`KILL #`, "1:6", "expected node reference name after '#'"},
}

func TestInvalid(t *testing.T) {
	for _, tc := range invalidScripts {
		_, _, err := parser.ParseScript(tc.src)
		list, ok := err.(parser.ErrorList)
		if !ok || len(list) == 0 {
			t.Errorf("ParseScript(%q): no error, want %s: %s", tc.src, tc.pos, tc.msg)
			continue
		}
		got := list[0]
		if got.Pos.String() != tc.pos || !strings.Contains(got.Msg, tc.msg) || len(list) != 1 {
			t.Errorf("ParseScript(%q):\n got %v\nwant %s: ...%s...", tc.src, err, tc.pos, tc.msg)
		}
	}
}

func TestRecovery(t *testing.T) {
	src := `SPAWN a: A
MATCH t: [x] RETURN t
SPAWN b: B
KILL 5
SET x.y = 1
WATCH t: T [mode: sometimes] RETURN t
NACK "d"
`
	s, _, err := parser.ParseScript(src)
	list, _ := err.(parser.ErrorList)
	var got []string
	for _, e := range list {
		got = append(got, e.Pos.String())
	}
	if want := "2:10 4:6 6:19"; strings.Join(got, " ") != want {
		t.Fatalf("errors at %v, want %s\n%v", got, want, err)
	}
	var kinds []string
	for _, st := range s.Stmts {
		kinds = append(kinds, typeName(st))
	}
	if want := "SpawnStmt BadStmt SpawnStmt BadStmt SetStmt BadStmt NackStmt"; strings.Join(kinds, " ") != want {
		t.Errorf("statements %v, want %s", kinds, want)
	}
}

func TestRecoveryOnOneLine(t *testing.T) {
	// Errors on one line are reported once; statements after them still parse.
	s, _, err := parser.ParseScript(`KILL 1; KILL 2; KILL j`)
	if list, _ := err.(parser.ErrorList); len(list) != 1 || list[0].Pos.String() != "1:6" {
		t.Fatalf("err = %v", err)
	}
	if len(s.Stmts) != 3 {
		t.Fatalf("got %d statements, want 3", len(s.Stmts))
	}
}

func TestAtMostTenErrors(t *testing.T) {
	src := strings.Repeat("KILL 1\n", 30)
	_, _, err := parser.ParseScript(src)
	list, _ := err.(parser.ErrorList)
	if len(list) != parser.MaxErrors {
		t.Fatalf("got %d errors, want %d", len(list), parser.MaxErrors)
	}
	if list[9].Pos.String() != "10:6" {
		t.Errorf("last error at %v", list[9].Pos)
	}
}

func TestNestingLimit(t *testing.T) {
	ok := strings.Repeat("(", parser.MaxNesting) + "1" + strings.Repeat(")", parser.MaxNesting)
	if _, err := parser.ParseExpr(ok); err != nil {
		t.Fatalf("%d levels: %v", parser.MaxNesting, err)
	}
	for _, deep := range []string{
		strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000),
		strings.Repeat("[", 100000),
		strings.Repeat("- ", 100000) + "1",
		strings.Repeat("NOT ", 100000) + "a",
		strings.Repeat("f(", 100000),
	} {
		_, err := parser.ParseExpr(deep)
		if err == nil || !strings.Contains(err.Error(), "nesting") {
			t.Errorf("ParseExpr(%.10q...) = %v, want a nesting error", deep, err)
		}
		_, _, err = parser.ParseScript("MATCH t: T WHERE " + deep + " RETURN t")
		if err == nil || !strings.Contains(err.Error(), "nesting") {
			t.Errorf("ParseScript(%.10q...) = %v, want a nesting error", deep, err)
		}
	}
}

func typeName(v any) string {
	return strings.TrimPrefix(strings.TrimPrefix(fmtType(v), "*"), "ast.")
}

func fmtType(v any) string { return fmt.Sprintf("%T", v) }
