package store_test

import (
	"bytes"
	"errors"
	"math"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/herald-mq/herald"
	"github.com/herald-mq/herald/store"
)

func TestCodecExamples(t *testing.T) {
	def := herald.String("pending")
	decl := &herald.TypeDecl{
		Kind:   herald.NodeDecl,
		Name:   "Job",
		Sealed: true,
		Attrs: []herald.AttrDecl{
			{Name: "status", Type: herald.KindString, Default: &def},
			{Name: "priority", Type: herald.KindInt, Required: true},
			{Name: "note", Type: herald.KindString, Optional: true},
			{Name: "extra", Any: true},
		},
	}
	got, err := store.DecodeTypeDecl(store.AppendTypeDecl(nil, decl))
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != herald.NodeDecl || got.Name != "Job" || !got.Sealed || len(got.Attrs) != 4 || got.Endpoints != nil {
		t.Fatalf("decoded %+v", got)
	}
	if a := got.Attr("status"); a == nil || a.Type != herald.KindString || a.Default == nil || a.Default.AsString() != "pending" {
		t.Fatalf("status: %+v", a)
	}
	if a := got.Attr("priority"); !a.Required || a.Optional || a.Any || a.Default != nil {
		t.Fatalf("priority: %+v", a)
	}
	if a := got.Attr("note"); !a.Optional || a.Required {
		t.Fatalf("note: %+v", a)
	}
	if a := got.Attr("extra"); !a.Any {
		t.Fatalf("extra: %+v", a)
	}

	edecl := &herald.TypeDecl{Kind: herald.EdgeDecl, Name: "inbox", Endpoints: []herald.EndpointDecl{
		{Name: "recipient", Type: "Actor"}, {Name: "message", Type: ""},
	}}
	got, err = store.DecodeTypeDecl(store.AppendTypeDecl(nil, edecl))
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != herald.EdgeDecl || len(got.Endpoints) != 2 || got.Endpoints[0] != edecl.Endpoints[0] || got.Endpoints[1] != edecl.Endpoints[1] {
		t.Fatalf("decoded %+v", got)
	}

	e := &herald.Edge{Type: "inbox", Endpoints: []herald.NodeID{"a", "b"}, Attrs: herald.AttrsOf(map[string]herald.Value{"at": herald.Timestamp(time.Unix(5, 6))})}
	ge, err := store.DecodeEdge(store.AppendEdge(nil, e))
	if err != nil {
		t.Fatal(err)
	}
	if ge.Key() != e.Key() || !ge.Attrs.Equal(e.Attrs) {
		t.Fatalf("decoded %+v", ge)
	}

	when := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("x", 3600))
	cs := &herald.ChangeSet{Seq: 7, Tick: 3, Time: when, Actor: "alice", Changes: []herald.Change{
		{Kind: herald.NodeChange, NodeAfter: &herald.Node{ID: "n1", Type: "Job", Attrs: herald.AttrsOf(map[string]herald.Value{"p": herald.Int(1)})}},
		{Kind: herald.EdgeChange, EdgeBefore: e},
		{Kind: herald.TypeChange, TypeBefore: decl, TypeAfter: edecl},
	}}
	gcs, err := store.DecodeChangeSet(store.AppendChangeSet(nil, cs), nil)
	if err != nil {
		t.Fatal(err)
	}
	if gcs.Seq != 7 || gcs.Tick != 3 || !gcs.Time.Equal(when) || gcs.Time.Location() != time.UTC || gcs.Actor != "alice" || len(gcs.Changes) != 3 {
		t.Fatalf("decoded %+v", gcs)
	}
	c0, c1, c2 := gcs.Changes[0], gcs.Changes[1], gcs.Changes[2]
	if c0.Kind != herald.NodeChange || c0.NodeBefore != nil || c0.NodeAfter.ID != "n1" || c0.NodeAfter.Attrs.Get("p").AsInt() != 1 {
		t.Fatalf("change 0: %+v", c0)
	}
	if c1.Kind != herald.EdgeChange || c1.EdgeAfter != nil || c1.EdgeBefore.Key() != e.Key() {
		t.Fatalf("change 1: %+v", c1)
	}
	if c2.Kind != herald.TypeChange || c2.TypeBefore.Name != "Job" || c2.TypeAfter.Name != "inbox" {
		t.Fatalf("change 2: %+v", c2)
	}

	zero, err := store.DecodeChangeSet(store.AppendChangeSet(nil, &herald.ChangeSet{Seq: 1}), nil)
	if err != nil || !zero.Time.IsZero() || zero.Changes != nil {
		t.Fatalf("zero time: %+v, %v", zero, err)
	}
}

func TestCodecDeterministic(t *testing.T) {
	n := &herald.Node{ID: "x", Type: "T", Attrs: herald.Attrs(nil)}
	for i := range 50 {
		n.Attrs = n.Attrs.With(string(rune('a'+i%26))+string(rune('a'+i/26)), herald.Int(int64(i)))
	}
	want := store.AppendNode(nil, n)
	for range 20 {
		if got := store.AppendNode(nil, n.Clone()); !bytes.Equal(got, want) {
			t.Fatal("encoding depends on map order")
		}
	}
}

func TestCodecRejectsCorrupt(t *testing.T) {
	cs := &herald.ChangeSet{Seq: 1, Tick: 1, Time: time.Unix(1, 0), Changes: []herald.Change{
		{Kind: herald.NodeChange, NodeAfter: &herald.Node{ID: "n", Type: "T", Attrs: herald.AttrsOf(map[string]herald.Value{"s": herald.String("hello")})}},
	}}
	good := store.AppendChangeSet(nil, cs)
	for i := range good {
		if _, err := store.DecodeChangeSet(good[:i], nil); !errors.Is(err, herald.ErrCorrupt) {
			t.Fatalf("prefix of %d bytes: err = %v", i, err)
		}
	}
	if _, err := store.DecodeChangeSet(append(good, 0), nil); !errors.Is(err, herald.ErrCorrupt) {
		t.Fatalf("trailing byte: err = %v", err)
	}
	bad := append([]byte{9}, good[1:]...)
	if _, err := store.DecodeChangeSet(bad, nil); !errors.Is(err, herald.ErrCorrupt) {
		t.Fatalf("bad version: err = %v", err)
	}
	for _, dec := range []func([]byte) error{
		func(b []byte) error { _, err := store.DecodeNode(b, nil); return err },
		func(b []byte) error { _, err := store.DecodeEdge(b); return err },
		func(b []byte) error { _, err := store.DecodeTypeDecl(b); return err },
	} {
		if err := dec(nil); !errors.Is(err, herald.ErrCorrupt) {
			t.Fatalf("empty input: err = %v", err)
		}
		// A huge count must be rejected, not allocated.
		if err := dec([]byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}); err == nil {
			t.Fatal("huge count accepted")
		}
	}
}

// The generators below build arbitrary domain values for the property tests.

func genValue(depth int) *rapid.Generator[herald.Value] {
	return rapid.Custom(func(t *rapid.T) herald.Value {
		max := 6
		if depth > 0 {
			max = 7
		}
		switch rapid.IntRange(0, max).Draw(t, "kind") {
		case 0:
			return herald.Null
		case 1:
			return herald.Bool(rapid.Bool().Draw(t, "b"))
		case 2:
			return herald.Int(rapid.Int64().Draw(t, "i"))
		case 3:
			f := rapid.Float64().Draw(t, "f")
			if rapid.IntRange(0, 10).Draw(t, "special") == 0 {
				f = rapid.SampledFrom([]float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)}).Draw(t, "sf")
			}
			return herald.Float(f)
		case 4:
			return herald.String(rapid.String().Draw(t, "s"))
		case 5:
			return herald.Timestamp(time.Unix(0, rapid.Int64().Draw(t, "ts")))
		case 6:
			return herald.Duration(time.Duration(rapid.Int64().Draw(t, "d")))
		default:
			return herald.List(rapid.SliceOfN(genValue(depth-1), 0, 3).Draw(t, "l")...)
		}
	})
}

func genAttrs() *rapid.Generator[herald.Attrs] {
	return rapid.Custom(func(t *rapid.T) herald.Attrs {
		if rapid.IntRange(0, 5).Draw(t, "nil") == 0 {
			return nil
		}
		return herald.AttrsOf(rapid.MapOfN(rapid.StringN(0, 8, -1), genValue(2), 0, 5).Draw(t, "attrs"))
	})
}

func genID() *rapid.Generator[herald.NodeID] {
	return rapid.Custom(func(t *rapid.T) herald.NodeID {
		return herald.NodeID(rapid.StringMatching(`[a-z0-9]{1,6}`).Draw(t, "id"))
	})
}

func genNode() *rapid.Generator[*herald.Node] {
	return rapid.Custom(func(t *rapid.T) *herald.Node {
		n := &herald.Node{ID: genID().Draw(t, "id"), Type: rapid.String().Draw(t, "type"), Attrs: genAttrs().Draw(t, "attrs"),
			Created: rapid.Uint64().Draw(t, "created"), Ver: rapid.Uint64().Draw(t, "ver")}
		if rapid.Bool().Draw(t, "body?") {
			// Body names never repeat an attribute held in memory.
			var names []string
			for _, name := range rapid.SliceOfNDistinct(rapid.StringN(1, 8, -1), 1, 3, func(s string) string { return s }).Draw(t, "body") {
				if !n.Attrs.Has(name) {
					names = append(names, name)
				}
			}
			if len(names) > 0 {
				sort.Strings(names)
				n.Body = herald.BodyRef(rapid.Uint64().Draw(t, "bseq"), names, rapid.IntRange(0, 1<<20).Draw(t, "bsize"), nil)
			}
		}
		return n
	})
}

func genEdge() *rapid.Generator[*herald.Edge] {
	return rapid.Custom(func(t *rapid.T) *herald.Edge {
		return &herald.Edge{
			Type:      rapid.String().Draw(t, "type"),
			Endpoints: rapid.SliceOfN(genID(), 0, 3).Draw(t, "endpoints"),
			Attrs:     genAttrs().Draw(t, "attrs"),
		}
	})
}

func genTypeDecl() *rapid.Generator[*herald.TypeDecl] {
	return rapid.Custom(func(t *rapid.T) *herald.TypeDecl {
		d := &herald.TypeDecl{
			Kind:   herald.DeclKind(rapid.Uint8().Draw(t, "kind")),
			Name:   rapid.String().Draw(t, "name"),
			Sealed: rapid.Bool().Draw(t, "sealed"),
		}
		for range rapid.IntRange(0, 4).Draw(t, "nattrs") {
			a := herald.AttrDecl{
				Name:     rapid.String().Draw(t, "aname"),
				Type:     herald.Kind(rapid.IntRange(0, 7).Draw(t, "atype")),
				Any:      rapid.Bool().Draw(t, "any"),
				Optional: rapid.Bool().Draw(t, "optional"),
				Required: rapid.Bool().Draw(t, "required"),
			}
			if rapid.Bool().Draw(t, "hasdefault") {
				v := genValue(1).Draw(t, "default")
				a.Default = &v
			}
			d.Attrs = append(d.Attrs, a)
		}
		for range rapid.IntRange(0, 3).Draw(t, "neps") {
			d.Endpoints = append(d.Endpoints, herald.EndpointDecl{Name: rapid.String().Draw(t, "epname"), Type: rapid.String().Draw(t, "eptype")})
		}
		return d
	})
}

func genChangeSet() *rapid.Generator[*herald.ChangeSet] {
	return rapid.Custom(func(t *rapid.T) *herald.ChangeSet {
		cs := &herald.ChangeSet{
			Seq:   rapid.Uint64().Draw(t, "seq"),
			Tick:  rapid.Uint64().Draw(t, "tick"),
			Actor: herald.NodeID(rapid.String().Draw(t, "actor")),
		}
		if rapid.Bool().Draw(t, "hastime") {
			cs.Time = time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "nsec"))
		}
		for range rapid.IntRange(0, 4).Draw(t, "nchanges") {
			c := herald.Change{Kind: herald.ChangeKind(rapid.IntRange(0, 4).Draw(t, "ckind"))}
			maybe := func(label string) bool { return rapid.Bool().Draw(t, label) }
			if maybe("nb") {
				c.NodeBefore = genNode().Draw(t, "nodebefore")
			}
			if maybe("na") {
				c.NodeAfter = genNode().Draw(t, "nodeafter")
			}
			if maybe("eb") {
				c.EdgeBefore = genEdge().Draw(t, "edgebefore")
			}
			if maybe("ea") {
				c.EdgeAfter = genEdge().Draw(t, "edgeafter")
			}
			if maybe("tb") {
				c.TypeBefore = genTypeDecl().Draw(t, "typebefore")
			}
			if maybe("ta") {
				c.TypeAfter = genTypeDecl().Draw(t, "typeafter")
			}
			cs.Changes = append(cs.Changes, c)
		}
		return cs
	})
}

// The encodings are deterministic and injective, so decode(encode(x)) re-encoding to the
// same bytes shows that every encoded field survives the round trip.
func TestCodecRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := genNode().Draw(t, "node")
		b := store.AppendNode(nil, n)
		gn, err := store.DecodeNode(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		if gn.ID != n.ID || gn.Type != n.Type || !gn.Attrs.Equal(n.Attrs) || !bytes.Equal(store.AppendNode(nil, gn), b) {
			t.Fatalf("node %+v decoded as %+v", n, gn)
		}

		e := genEdge().Draw(t, "edge")
		b = store.AppendEdge(nil, e)
		ge, err := store.DecodeEdge(b)
		if err != nil {
			t.Fatal(err)
		}
		if ge.Key() != e.Key() || len(ge.Endpoints) != len(e.Endpoints) || !bytes.Equal(store.AppendEdge(nil, ge), b) {
			t.Fatalf("edge %+v decoded as %+v", e, ge)
		}

		d := genTypeDecl().Draw(t, "decl")
		b = store.AppendTypeDecl(nil, d)
		gd, err := store.DecodeTypeDecl(b)
		if err != nil {
			t.Fatal(err)
		}
		if gd.Name != d.Name || gd.Kind != d.Kind || gd.Sealed != d.Sealed || len(gd.Attrs) != len(d.Attrs) || !bytes.Equal(store.AppendTypeDecl(nil, gd), b) {
			t.Fatalf("decl %+v decoded as %+v", d, gd)
		}

		cs := genChangeSet().Draw(t, "changeset")
		b = store.AppendChangeSet(nil, cs)
		gcs, err := store.DecodeChangeSet(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		if gcs.Seq != cs.Seq || gcs.Tick != cs.Tick || !gcs.Time.Equal(cs.Time) || gcs.Actor != cs.Actor || len(gcs.Changes) != len(cs.Changes) {
			t.Fatalf("change set %+v decoded as %+v", cs, gcs)
		}
		for i := range cs.Changes {
			w, g := &cs.Changes[i], &gcs.Changes[i]
			if w.Kind != g.Kind || (w.NodeBefore == nil) != (g.NodeBefore == nil) || (w.NodeAfter == nil) != (g.NodeAfter == nil) ||
				(w.EdgeBefore == nil) != (g.EdgeBefore == nil) || (w.EdgeAfter == nil) != (g.EdgeAfter == nil) ||
				(w.TypeBefore == nil) != (g.TypeBefore == nil) || (w.TypeAfter == nil) != (g.TypeAfter == nil) {
				t.Fatalf("change %d: %+v decoded as %+v", i, w, g)
			}
		}
		if !bytes.Equal(store.AppendChangeSet(nil, gcs), b) {
			t.Fatal("change set does not re-encode to the same bytes")
		}
	})
}

func FuzzDecode(f *testing.F) {
	def := herald.List(herald.Int(1), herald.String("x"))
	f.Add(store.AppendNode(nil, &herald.Node{ID: "a", Type: "T", Attrs: herald.AttrsOf(map[string]herald.Value{"x": herald.Float(1.5)})}))
	f.Add(store.AppendEdge(nil, &herald.Edge{Type: "e", Endpoints: []herald.NodeID{"a", "b"}}))
	f.Add(store.AppendTypeDecl(nil, &herald.TypeDecl{Kind: herald.NodeDecl, Name: "T", Attrs: []herald.AttrDecl{{Name: "x", Default: &def}}}))
	f.Add(store.AppendChangeSet(nil, &herald.ChangeSet{Seq: 1, Time: time.Unix(1, 2), Changes: []herald.Change{
		{Kind: herald.NodeChange, NodeAfter: &herald.Node{ID: "a"}},
		{Kind: herald.TypeChange, TypeAfter: &herald.TypeDecl{Name: "T"}},
	}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Corrupt input must return an error, never panic; whatever decodes must encode.
		if n, err := store.DecodeNode(b, nil); err == nil {
			_ = store.AppendNode(nil, n)
		}
		if e, err := store.DecodeEdge(b); err == nil {
			_ = store.AppendEdge(nil, e)
		}
		if d, err := store.DecodeTypeDecl(b); err == nil {
			_ = store.AppendTypeDecl(nil, d)
		}
		if cs, err := store.DecodeChangeSet(b, nil); err == nil {
			_ = store.AppendChangeSet(nil, cs)
		}
	})
}
