package ast

import (
	"reflect"
	"testing"

	"github.com/herald-mq/herald/lang/token"
)

func TestInspectOrderAndParams(t *testing.T) {
	// MATCH t: Task WHERE t.owner = $who AND t.n > $min RETURN t, $who
	m := &MatchStmt{
		Match: 1,
		Pattern: &Pattern{Elems: []PatternElem{
			&NodePattern{Var: &Ident{NamePos: 7, Name: "t"}, Type: &Ident{NamePos: 10, Name: "Task"}},
		}},
		Where: &BinaryExpr{
			X: &BinaryExpr{
				X:  &SelectorExpr{X: &Ident{Name: "t"}, Sel: &Ident{Name: "owner"}},
				Op: token.EQL,
				Y:  &ParamRef{Name: "who"},
			},
			Op: token.AND,
			Y: &BinaryExpr{
				X:  &SelectorExpr{X: &Ident{Name: "t"}, Sel: &Ident{Name: "n"}},
				Op: token.GTR,
				Y:  &ParamRef{Name: "min"},
			},
		},
		Return: &ReturnClause{Items: []*ReturnItem{{X: &Ident{Name: "t"}}, {X: &ParamRef{Name: "who"}}}},
	}
	if got, want := Params(&Script{Stmts: []Stmt{m}}), []string{"who", "min"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Params = %v, want %v", got, want)
	}
	var idents []string
	nils := 0
	Inspect(m, func(n Node) bool {
		switch n := n.(type) {
		case nil:
			nils++
		case *Ident:
			idents = append(idents, n.Name)
		}
		return true
	})
	want := []string{"t", "Task", "t", "owner", "t", "n", "t"}
	if !reflect.DeepEqual(idents, want) {
		t.Fatalf("idents = %v, want %v", idents, want)
	}
	if nils == 0 {
		t.Fatal("f(nil) was never called")
	}
}

func TestInspectWatchOptionOrder(t *testing.T) {
	w := &WatchStmt{
		Watch:   1,
		Pattern: &Pattern{},
		Where:   &Ident{NamePos: 20, Name: "cond"},
		Options: []*OptionList{
			{Lbrack: 10, Options: []*WatchOption{{Name: &Ident{NamePos: 11, Name: "before"}}}},
			{Lbrack: 30, Options: []*WatchOption{{Name: &Ident{NamePos: 31, Name: "after"}}}},
		},
	}
	var idents []string
	Inspect(w, func(n Node) bool {
		if id, ok := n.(*Ident); ok {
			idents = append(idents, id.Name)
		}
		return true
	})
	if want := []string{"before", "cond", "after"}; !reflect.DeepEqual(idents, want) {
		t.Fatalf("idents = %v, want %v", idents, want)
	}
}
