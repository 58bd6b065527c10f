package eval_test

import (
	"testing"
	"time"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/lang/eval"
	"github.com/herald-mq/herald/lang/parser"
)

func run(t *testing.T, src string) (herald.Value, error) {
	t.Helper()
	x, err := parser.ParseExpr(src)
	if err != nil {
		t.Fatalf("parse %q: %v", src, err)
	}
	sc := eval.NewScope()
	n := sc.Declare("n", eval.NodeVar)
	c := &eval.Compiler{Scope: sc}
	f, err := c.Compile(x)
	if err != nil {
		return herald.Null, err
	}
	row := make(eval.Row, sc.Len())
	customer := herald.Map([]string{"id", "tags"}, []herald.Value{herald.Int(7), herald.List(herald.String("vip"))})
	row[n].Node = &herald.Node{ID: "n1", Type: "T", Attrs: herald.AttrsOf(map[string]herald.Value{"i": herald.Int(4), "s": herald.String("héllo"), "customer": customer,
		"deep": herald.Map([]string{"a"}, []herald.Value{herald.Map([]string{"b"}, []herald.Value{herald.Int(1)})})})}
	ctx := &eval.Context{Params: map[string]herald.Value{"p": herald.Int(2), "b": herald.Bytes([]byte("hi\xff"))}, Now: time.Unix(100, 0).UTC(), Actor: "bob", Session: "s1"}
	return f(ctx, row)
}

func TestExpressions(t *testing.T) {
	cases := map[string]string{
		`1 + 2 * 3`:                     `7`,
		`(1 + 2) * 3`:                   `9`,
		`7 / 2`:                         `3`,
		`7.0 / 2`:                       `3.5`,
		`-n.i % 3`:                      `-1`,
		`"a" + "b"`:                     `"ab"`,
		`[1] + [2]`:                     `[1, 2]`,
		`2 = 2.0`:                       `true`,
		`"2" = 2`:                       `false`,
		`"a" < 1`:                       `null`,
		`null = null`:                   `null`,
		`n.missing IS NULL`:             `true`,
		`n.i IS NOT NULL`:               `true`,
		`true AND null`:                 `null`,
		`false AND null`:                `false`,
		`true OR null`:                  `true`,
		`NOT null`:                      `null`,
		`n.i IN [1, 4]`:                 `true`,
		`n.i IN []`:                     `false`,
		`n = #n1`:                       `true`,
		`n.id`:                          `"n1"`,
		`n.customer.id`:                 `7`,
		`n.customer.id = 7`:             `true`,
		`n.customer.missing IS NULL`:    `true`,
		`n.missing.id IS NULL`:          `true`,
		`n.deep.a.b + 1`:                `2`,
		`length(n.customer.tags)`:       `1`,
		`(n.customer).id`:               `7`,
		`length(n.s)`:                   `5`,
		`length([1, 2, 3])`:             `3`,
		`coalesce(n.missing, null, $p)`: `2`,
		`now() + 1m - now()`:            `1m0s`,
		`2h / 4`:                        `30m0s`,
		`current_actor()`:               `"bob"`,
		`current_session()`:             `"s1"`,
		`#self`:                         `"bob"`,
		`n.i >= $p AND n.s <> "x"`:      `true`,
		`1 + null`:                      `null`,
		`NOT (n.i > 3)`:                 `false`,
		`n.i - 10 < 0 OR 1 / 0 = 1`:     `true`, // short-circuit
		`1.5e1`:                         `15.0`,
		`"esc\"aped"`:                   `"esc\"aped"`,
		`n`:                             `{id: "n1", _type: "T", customer: {id: 7, tags: ["vip"]}, deep: {a: {b: 1}}, i: 4, s: "héllo"}`,
		`-(2.5)`:                        `-2.5`,
		`n.i * 1.5`:                     `6.0`,
		`coalesce(n.i, 1) = n.i`:        `true`,
		`n.i IN [n.i]`:                  `true`,
		`length(null)`:                  `null`,
		`length($b)`:                    `3`,
		`length(bytes("héllo"))`:        `6`, // bytes, where a String counts characters
		`bytes("hi")`:                   `0x6869`,
		`bytes("hi") = bytes("hi")`:     `true`,
		`bytes("hi") = "hi"`:            `false`, // another kind
		`bytes("hi") < $b`:              `true`,  // byte by byte
		`string(bytes("héllo"))`:        `"héllo"`,
		`string("x")`:                   `"x"`,
		`bytes($b) = $b`:                `true`,
		`bytes(null)`:                   `null`,
		`string(null)`:                  `null`,
		`$b IN [bytes("x"), $b]`:        `true`,
	}
	for src, want := range cases {
		got, err := run(t, src)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if got.String() != want {
			t.Errorf("%s = %s, want %s", src, got, want)
		}
	}
}

func TestExpressionErrors(t *testing.T) {
	cases := map[string]herald.Code{
		`1 / 0`:       herald.CodeEvaluation,
		`"a" - 1`:     herald.CodeEvaluation,
		`NOT 1`:       herald.CodeEvaluation,
		`1 AND true`:  herald.CodeEvaluation,
		`nope()`:      herald.CodeEvaluation,
		`length(1)`:   herald.CodeEvaluation,
		`now(1)`:      herald.CodeEvaluation,
		`COUNT(n)`:    herald.CodeInvalidQuery,
		`x.a`:         herald.CodeUnknownVariable,
		`$missing`:    herald.CodeMissingParameter,
		`1 IN 2`:      herald.CodeEvaluation,
		`-"a"`:        herald.CodeEvaluation,
		`n.i.j`:       herald.CodeEvaluation, // i is an Int, not a Map
		`1 .j`:        herald.CodeInvalidQuery,
		`coalesce()`:  herald.CodeEvaluation,
		`now() + "x"`: herald.CodeEvaluation,
		`string($b)`:  herald.CodeEvaluation, // not UTF-8
		`string(1)`:   herald.CodeEvaluation,
		`bytes(1)`:    herald.CodeEvaluation,
		`bytes()`:     herald.CodeEvaluation,
		`$b + $b`:     herald.CodeEvaluation,
	}
	for src, want := range cases {
		_, err := run(t, src)
		if herald.CodeOf(err) != want {
			t.Errorf("%s: err = %v, want %s", src, err, want)
		}
	}
}

func TestAggregates(t *testing.T) {
	sc := eval.NewScope()
	slot := sc.Declare("n", eval.NodeVar)
	for src, want := range map[string]string{
		`COUNT(*)`:               `4`,
		`COUNT(n.v)`:             `3`,
		`COUNT(DISTINCT n.v)`:    `2`,
		`SUM(n.v)`:               `5`,
		`AVG(n.v)`:               `1.6666666666666667`,
		`MIN(n.v)`:               `1`,
		`MAX(n.v)`:               `2`,
		`COUNT(n WHERE n.v = 2)`: `2`,
		`SUM(n.v WHERE n.v > 5)`: `null`,
	} {
		x, err := parser.ParseExpr(src)
		if err != nil {
			t.Fatal(err)
		}
		c := &eval.Compiler{Scope: sc, AllowAggs: true}
		f, err := c.Compile(x)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		acc := eval.NewAccumulator(c.Aggs[0])
		ctx := &eval.Context{}
		for _, v := range []herald.Value{herald.Int(1), herald.Int(2), herald.Int(2), herald.Null} {
			row := make(eval.Row, sc.Len())
			row[slot].Node = &herald.Node{ID: "x", Type: "T", Attrs: herald.AttrsOf(map[string]herald.Value{"v": v})}
			if err := acc.Add(ctx, row); err != nil {
				t.Fatal(err)
			}
		}
		ctx.Aggs = []herald.Value{acc.Result()}
		got, _ := f(ctx, nil)
		if got.String() != want {
			t.Errorf("%s = %s, want %s", src, got, want)
		}
	}
}
