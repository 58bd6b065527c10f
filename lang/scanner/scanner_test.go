package scanner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/herald-mq/herald/lang/token"
)

func scanAll(src string, mode Mode) (toks []string, errs []string) {
	var s Scanner
	s.Init([]byte(src), func(pos token.Pos, msg string) {
		errs = append(errs, fmt.Sprintf("%d: %s", pos, msg))
	}, mode)
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return toks, errs
		}
		toks = append(toks, fmt.Sprintf("%d %s %s", pos, tok, lit))
	}
}

func TestScan(t *testing.T) {
	tests := []struct{ src, want string }{
		{`abc _ _x a1 MATCH match`, "1 identifier abc|5 identifier _|7 identifier _x|10 identifier a1|13 MATCH MATCH|19 MATCH match"},
		{`1 1.5 1e3 2.0 1.5E-2`, "1 integer 1|3 float 1.5|7 float 1e3|11 float 2.0|15 float 1.5E-2"},
		{`30s 250ms 1h30m 5m 2us 3ns 1.5h`, "1 duration 30s|5 duration 250ms|11 duration 1h30m|17 duration 5m|20 duration 2us|24 duration 3ns|28 duration 1.5h"},
		{`"a\"b" "" "\u00e9\n"`, `1 string "a\"b"|8 string ""|11 string "\u00e9\n"`},
		{`$p #n #delivery_abc123 $1`, "1 parameter p|4 node reference n|7 node reference delivery_abc123|24 parameter 1"},
		{`+ - * / % = != <> < <= > >= ( ) [ ] { } , . : ; ?`, "1 + |3 - |5 * |7 / |9 % |11 = |13 != |16 != |19 < |21 <= |24 > |26 >= |29 ( |31 ) |33 [ |35 ] |37 { |39 } |41 , |43 . |45 : |47 ; |49 ? "},
		{"a -- comment\nb", "1 identifier a|14 identifier b"},
		{"x.id", "1 identifier x|2 . |3 identifier id"},
	}
	for _, tc := range tests {
		toks, errs := scanAll(tc.src, 0)
		if got := strings.Join(toks, "|"); got != tc.want || errs != nil {
			t.Errorf("scan %q:\n got %s %v\nwant %s", tc.src, got, errs, tc.want)
		}
	}
}

func TestScanComments(t *testing.T) {
	toks, _ := scanAll("a -- note\n", ScanComments)
	if got := strings.Join(toks, "|"); got != "1 identifier a|3 COMMENT -- note" {
		t.Errorf("got %s", got)
	}
}

func TestScanErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{`"abc`, "1: string literal not terminated"},
		{"\"ab\nc", "1: string literal not terminated"},
		{`"\x41"`, "2: unknown escape sequence"},
		{`"\u12"`, "2: escape sequence needs 4 hexadecimal digits"},
		{`"\U0011ffff"`, "2: escape sequence is invalid Unicode code point"},
		{`5min`, `2: unknown duration unit "min" (use ns, us, ms, s, m or h)`},
		{`1e3s`, `1: bad number literal "1e3s"`},
		{`1h3`, `1: bad duration literal "1h3"`},
		{`12abc`, `3: unknown duration unit "abc" (use ns, us, ms, s, m or h)`},
		{`!`, "1: illegal character '!' (use NOT or !=)"},
		{`@`, "1: illegal character U+0040 '@'"},
		{`$ x`, "1: expected parameter name after '$'"},
		{"\xff", "1: invalid UTF-8 encoding"},
	}
	for _, tc := range tests {
		_, errs := scanAll(tc.src, 0)
		if len(errs) != 1 || errs[0] != tc.want {
			t.Errorf("scan %q: errors %q, want %q", tc.src, errs, tc.want)
		}
	}
}

func TestUnquote(t *testing.T) {
	s, err := Unquote(`"a\"b\n\u00e9"`)
	if err != nil || s != "a\"b\né" {
		t.Errorf("Unquote = %q, %v", s, err)
	}
}

func TestIsIdentifier(t *testing.T) {
	for name, want := range map[string]bool{"a": true, "_": true, "a1": true, "1a": false, "": false, "match": false, "a-b": false} {
		if IsIdentifier(name) != want {
			t.Errorf("IsIdentifier(%q) != %v", name, want)
		}
	}
}
