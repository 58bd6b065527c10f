// Package printer formats syntax trees of Herald's query language as canonical source
// text. Keywords are upper-case, each statement of a script takes one line, and
// parentheses are added only where the tree would otherwise read differently.
package printer

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/herald-mq/herald/lang/ast"
	"github.com/herald-mq/herald/lang/token"
)

// Fprint writes the canonical text of node to w. A Script prints one statement per
// line, each ending in `;`; any other node prints on its own without a terminator.
// Nodes that stand for syntax errors (BadStmt, BadExpr) cannot be printed.
func Fprint(w io.Writer, node ast.Node) error {
	var p printer
	if err := p.node(node); err != nil {
		return err
	}
	_, err := w.Write(p.buf.Bytes())
	return err
}

// String returns the canonical text of node, or a short note when it cannot be printed.
func String(node ast.Node) string {
	var b strings.Builder
	if err := Fprint(&b, node); err != nil {
		return "<" + err.Error() + ">"
	}
	return b.String()
}

type printer struct {
	buf bytes.Buffer
	err error
}

type badNode struct{ node ast.Node }

func (p *printer) node(n ast.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(badNode)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("printer: cannot print %T", b.node)
		}
	}()
	switch n := n.(type) {
	case *ast.Script:
		for _, s := range n.Stmts {
			p.stmt(s)
			p.print(";\n")
		}
	case ast.Stmt:
		p.stmt(n)
	case ast.Expr:
		p.expr(n)
	case *ast.Pattern:
		p.pattern(n)
	case *ast.NodePattern, *ast.EdgePattern:
		p.pattern(&ast.Pattern{Elems: []ast.PatternElem{n.(ast.PatternElem)}})
	case *ast.ReturnClause:
		p.returnClause(n)
	case *ast.ReturnItem:
		p.returnItem(n)
	case *ast.OrderItem:
		p.orderItem(n)
	case *ast.Assign:
		p.assign(n)
	case *ast.Body:
		p.body(n)
	case *ast.Modifiers:
		p.modifiers(n)
	case *ast.TypeRef:
		p.typeRef(n)
	case *ast.AttrDecl:
		p.attrDecl(n)
	case *ast.EndpointDecl:
		p.print(n.Name.Name, ": ", n.Type.Name)
	case *ast.WatchOption:
		p.option(n)
	case *ast.OptionList:
		p.optionList(n)
	case *ast.OnMatch:
		p.onMatch(n)
	default:
		return fmt.Errorf("printer: unsupported node %T", n)
	}
	return nil
}

func (p *printer) print(ss ...string) {
	for _, s := range ss {
		p.buf.WriteString(s)
	}
}

// ---------------------------------------------------------------------------
// Statements

func (p *printer) stmt(s ast.Stmt) {
	switch s := s.(type) {
	case *ast.NodeDeclStmt:
		p.print("NODE ", s.Name.Name)
		if s.Mods != nil {
			p.print(" ")
			p.modifiers(s.Mods)
		}
		p.print(" ")
		p.attrDecls(s.Attrs)
	case *ast.EdgeDeclStmt:
		p.print("EDGE ", s.Name.Name, "(")
		for i, e := range s.Endpoints {
			if i > 0 {
				p.print(", ")
			}
			p.print(e.Name.Name, ": ", e.Type.Name)
		}
		p.print(")")
		if s.Mods != nil {
			p.print(" ")
			p.modifiers(s.Mods)
		}
		if s.Lbrace.IsValid() || len(s.Attrs) > 0 {
			p.print(" ")
			p.attrDecls(s.Attrs)
		}
	case *ast.SpawnStmt:
		p.print("SPAWN ")
		if s.IfNotExists.IsValid() {
			p.print("IF NOT EXISTS ")
		}
		if s.ID != nil {
			p.expr(s.ID)
		} else {
			p.print(s.Var.Name)
		}
		p.print(": ", s.Type.Name)
		if s.Body != nil {
			p.print(" ")
			p.body(s.Body)
		}
		p.returning(s.Returning)
	case *ast.KillStmt:
		p.print("KILL ")
		p.expr(s.Target)
		p.returning(s.Returning)
	case *ast.LinkStmt:
		p.print("LINK ")
		p.edgePattern(s.Edge)
		if s.Body != nil {
			p.print(" ")
			p.body(s.Body)
		}
		p.returning(s.Returning)
	case *ast.UnlinkStmt:
		p.print("UNLINK ")
		p.edgePattern(s.Edge)
		p.returning(s.Returning)
	case *ast.SetStmt:
		p.print("SET ")
		for i, a := range s.Assigns {
			if i > 0 {
				p.print(", ")
			}
			p.assign(a)
		}
		p.returning(s.Returning)
	case *ast.MatchStmt:
		p.print("MATCH ")
		p.pattern(s.Pattern)
		if s.Where != nil {
			p.print(" WHERE ")
			p.expr(s.Where)
		}
		for _, a := range s.Actions {
			p.print(" ")
			p.stmt(a)
		}
		if s.Return != nil {
			p.print(" ")
			p.returnClause(s.Return)
		}
		if len(s.OrderBy) > 0 {
			p.print(" ORDER BY ")
			for i, o := range s.OrderBy {
				if i > 0 {
					p.print(", ")
				}
				p.orderItem(o)
			}
		}
		if s.Limit != nil {
			p.print(" LIMIT ")
			p.expr(s.Limit)
			if s.Offset != nil {
				p.print(" OFFSET ")
				p.expr(s.Offset)
			}
		}
	case *ast.BeginStmt:
		p.print("BEGIN")
	case *ast.CommitStmt:
		p.print("COMMIT")
	case *ast.RollbackStmt:
		p.print("ROLLBACK")
	case *ast.BeginSessionStmt:
		p.print("BEGIN SESSION AS ")
		p.expr(s.Actor)
	case *ast.EndSessionStmt:
		p.print("END SESSION")
	case *ast.TickStmt:
		p.print("TICK")
		if s.Count != nil {
			p.print(" ")
			p.expr(s.Count)
		}
	case *ast.WatchStmt:
		if s.Handle != nil {
			p.print(s.Handle.Name, " = ")
		}
		p.print("WATCH ")
		p.pattern(s.Pattern)
		before, after := s.SplitOptions()
		for _, o := range before {
			p.print(" ")
			p.optionList(o)
		}
		if s.Where != nil {
			p.print(" WHERE ")
			p.expr(s.Where)
		}
		for _, o := range after {
			p.print(" ")
			p.optionList(o)
		}
		if s.Return != nil {
			p.print(" ")
			p.returnClause(s.Return)
		}
		if s.OnMatch != nil {
			p.print(" ")
			p.onMatch(s.OnMatch)
		}
	case *ast.AckStmt:
		p.print("ACK ")
		p.expr(s.ID)
	case *ast.RedriveStmt:
		p.print("REDRIVE ")
		p.expr(s.ID)
	case *ast.ConstraintDeclStmt:
		p.print("CONSTRAINT ", s.Name.Name, ": ")
		p.pattern(s.Pattern)
		p.print(" => ")
		p.expr(s.Cond)
	case *ast.DropConstraintStmt:
		p.print("DROP CONSTRAINT ", s.Name.Name)
	case *ast.NackStmt:
		p.print("NACK ")
		p.expr(s.ID)
		if s.Options != nil {
			p.print(" ")
			p.optionList(s.Options)
		}
	case *ast.ExtendStmt:
		p.print("EXTEND ")
		p.expr(s.ID)
		if s.Options != nil {
			p.print(" ")
			p.optionList(s.Options)
		}
	case *ast.WatchControlStmt:
		p.print(s.Op.String(), " WATCH ")
		p.expr(s.Handle)
	case *ast.AlterTypeStmt:
		p.print("ALTER TYPE ", s.Name.Name, " DROP ")
		for i, d := range s.Drop {
			if i > 0 {
				p.print(", ")
			}
			p.print(d.Name)
		}
	case *ast.AlterWatchStmt:
		p.print("ALTER WATCH ")
		p.expr(s.Handle)
		p.print(" SET")
		for _, o := range s.Options {
			p.print(" ")
			p.optionList(o)
		}
	default:
		panic(badNode{s})
	}
}

func (p *printer) onMatch(o *ast.OnMatch) {
	p.print("ON MATCH DO")
	for _, a := range o.Actions {
		p.print(" ")
		p.stmt(a)
	}
}

func (p *printer) returning(r *ast.ReturnClause) {
	if r != nil {
		p.print(" ")
		p.returnClause(r)
	}
}

func (p *printer) attrDecls(attrs []*ast.AttrDecl) {
	if len(attrs) == 0 {
		p.print("{}")
		return
	}
	p.print("{ ")
	for i, a := range attrs {
		if i > 0 {
			p.print(", ")
		}
		p.attrDecl(a)
	}
	p.print(" }")
}

func (p *printer) attrDecl(a *ast.AttrDecl) {
	p.print(a.Name.Name, ": ")
	p.typeRef(a.Type)
	if a.Default != nil {
		p.print(" = ")
		p.expr(a.Default)
	}
	if a.Mods != nil {
		p.print(" ")
		p.modifiers(a.Mods)
	}
}

func (p *printer) typeRef(t *ast.TypeRef) {
	if t.Lbrack.IsValid() || t.Rbrack.IsValid() {
		p.print("[", t.Name.Name, "]")
	} else {
		p.print(t.Name.Name)
	}
	if t.Optional {
		p.print("?")
	}
}

func (p *printer) modifiers(m *ast.Modifiers) {
	p.print("[")
	for i, w := range m.Words {
		if i > 0 {
			p.print(", ")
		}
		p.print(w.Name)
	}
	p.print("]")
}

func (p *printer) body(b *ast.Body) {
	if len(b.Assigns) == 0 {
		p.print("{}")
		return
	}
	p.print("{ ")
	for i, a := range b.Assigns {
		if i > 0 {
			p.print(", ")
		}
		p.assign(a)
	}
	p.print(" }")
}

func (p *printer) assign(a *ast.Assign) {
	p.expr(a.Target)
	p.print(" = ")
	p.expr(a.Value)
}

func (p *printer) pattern(pat *ast.Pattern) {
	for i, e := range pat.Elems {
		if i > 0 {
			p.print(", ")
		}
		switch e := e.(type) {
		case *ast.NodePattern:
			p.print(e.Var.Name, ": ", e.Type.Name)
		case *ast.EdgePattern:
			p.edgePattern(e)
		default:
			panic(badNode{e})
		}
	}
}

func (p *printer) edgePattern(e *ast.EdgePattern) {
	if e.Var != nil {
		p.print(e.Var.Name, ": ")
	}
	p.print(e.Type.Name, "(")
	p.exprList(e.Args)
	p.print(")")
}

func (p *printer) returnClause(r *ast.ReturnClause) {
	if r.Returning {
		p.print("RETURNING ")
	} else {
		p.print("RETURN ")
		if r.Distinct {
			p.print("DISTINCT ")
		}
	}
	for i, it := range r.Items {
		if i > 0 {
			p.print(", ")
		}
		p.returnItem(it)
	}
}

func (p *printer) returnItem(it *ast.ReturnItem) {
	p.expr(it.X)
	if it.Alias != nil {
		p.print(" AS ", it.Alias.Name)
	}
}

func (p *printer) orderItem(o *ast.OrderItem) {
	p.expr(o.X)
	if o.Dir == token.ASC || o.Dir == token.DESC {
		p.print(" ", o.Dir.String())
	}
}

func (p *printer) optionList(l *ast.OptionList) {
	p.print("[")
	for i, o := range l.Options {
		if i > 0 {
			p.print(", ")
		}
		p.option(o)
	}
	p.print("]")
}

func (p *printer) option(o *ast.WatchOption) {
	p.print(o.Name.Name)
	if o.Value != nil {
		p.print(": ")
		p.expr(o.Value)
	}
}
