package parser_test

import (
	"reflect"
	"testing"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/parser"
	"github.com/herald-mq/herald/lang/printer"
	"github.com/herald-mq/herald/lang/token"
)

var posType = reflect.TypeOf(token.NoPos)

// zeroPos sets every token.Pos field reachable from v to NoPos.
func zeroPos(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			zeroPos(v.Elem())
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			zeroPos(v.Index(i))
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if f.Type() == posType {
				f.SetInt(0)
				continue
			}
			zeroPos(f)
		}
	}
}

// equalIgnoringPos reports whether two trees are equal apart from positions. It
// modifies both.
func equalIgnoringPos(a, b ast.Node) bool {
	zeroPos(reflect.ValueOf(a))
	zeroPos(reflect.ValueOf(b))
	return reflect.DeepEqual(a, b)
}

// checkRoundTrip parses src, which must be valid, prints it, parses the result again
// and compares. It also checks that printing is idempotent.
func checkRoundTrip(t *testing.T, src string) {
	t.Helper()
	s1, _, err := parser.ParseScript(src)
	if err != nil {
		t.Fatalf("parse %q: %v", src, err)
	}
	out1 := printer.String(s1)
	s2, _, err := parser.ParseScript(out1)
	if err != nil {
		t.Fatalf("reparse of %q\nprinted as %q: %v", src, out1, err)
	}
	out2 := printer.String(s2)
	if out1 != out2 {
		t.Fatalf("printing is not idempotent for %q:\n%s\n%s", src, out1, out2)
	}
	if !equalIgnoringPos(s1, s2) {
		t.Fatalf("round trip changed the tree of %q\nprinted as %q", src, out1)
	}
}

func TestRoundTripSeeds(t *testing.T) {
	for _, src := range seedExamples {
		checkRoundTrip(t, src)
	}
}

func TestRoundTripValid(t *testing.T) {
	for _, src := range validScripts {
		checkRoundTrip(t, src)
	}
}

func FuzzParse(f *testing.F) {
	for _, src := range seedExamples {
		f.Add(src)
	}
	for _, src := range validScripts {
		f.Add(src)
	}
	for _, tc := range invalidScripts {
		f.Add(tc.src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		s, file, err := parser.ParseScript(src)
		if s == nil || file == nil {
			t.Fatal("nil script or file")
		}
		if err != nil {
			if list, ok := err.(parser.ErrorList); !ok || len(list) == 0 || len(list) > parser.MaxErrors {
				t.Fatalf("bad error value %#v", err)
			}
			for _, st := range s.Stmts {
				if st == nil {
					t.Fatal("nil statement in partial script")
				}
			}
			return
		}
		checkRoundTrip(t, src)
		_, _ = parser.ParseExpr(src)
	})
}

// Parses share their token slices through a pool: a syntax tree must keep nothing of
// the slice it was parsed from, so that later parses, which reuse it, leave it as it
// was.
func TestParseKeepsNothingOfItsTokens(t *testing.T) {
	var trees []*ast.Script
	var want []string
	for _, src := range validScripts {
		s, _, err := parser.ParseScript(src)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		trees = append(trees, s)
		want = append(want, printer.String(s))
	}
	for range 3 {
		for _, src := range validScripts {
			_, _, _ = parser.ParseScript(src + " ; " + src)
			_, _ = parser.ParseExpr("a.b + $c * 2 <> 'text'")
		}
	}
	for i, s := range trees {
		if got := printer.String(s); got != want[i] {
			t.Errorf("%q printed %q after later parses, %q before", validScripts[i], got, want[i])
		}
	}
}

// BenchmarkParseWatch parses the statement a watch-mode watch opens with; -benchmem
// shows what a parse allocates.
func BenchmarkParseWatch(b *testing.B) {
	const src = `WATCH m: BenchMsg [mode: watch, delivery: best_effort, initial: none] RETURN m.body AS body`
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := parser.ParseScript(src); err != nil {
			b.Fatal(err)
		}
	}
}
