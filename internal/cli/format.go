package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/herald-mq/herald"
)

// queryResponse is the 200 answer of POST /v1/query, decoded loosely enough that the
// CLI can print any value the server sends.
type queryResponse struct {
	Results []result `json:"results"`
	Seq     uint64   `json:"seq"`
	Tick    uint64   `json:"tick"`
}

type result struct {
	Columns []string            `json:"columns"`
	Rows    [][]json.RawMessage `json:"rows"`
	Stats   stats               `json:"stats"`
}

// stats keeps the server's statistics in the order it sent them.
type stats []stat

type stat struct {
	Key   string
	Value json.RawMessage
}

func (s *stats) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		*s = nil
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("stats: expected an object")
	}
	var out stats
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		out = append(out, stat{Key: key, Value: v})
	}
	*s = out
	return nil
}

// errorText is how the command line shows a Herald error: its code and name, the
// position it points at in the query text, and its message.
func errorText(e *herald.Error) string {
	name := " " + e.Code.Name()
	if e.Code.Info().Code != e.Code {
		name = "" // a code this binary does not know: no name to give it
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s%s at %d:%d: %s", e.Code, name, e.Line, e.Column, e.Message)
	}
	return fmt.Sprintf("%s%s: %s", e.Code, name, e.Message)
}

// errorJSON renders a Herald error as the JSON API's error body.
func errorJSON(e *herald.Error) string {
	type detail struct {
		Code    herald.Code `json:"code"`
		Name    string      `json:"name"`
		Message string      `json:"message"`
		Line    int         `json:"line,omitempty"`
		Column  int         `json:"column,omitempty"`
	}
	b, _ := json.Marshal(map[string]detail{"error": {e.Code, e.Code.Name(), e.Message, e.Line, e.Column}})
	return string(b)
}

// formatResponse renders a query response: one block per statement result, then the
// position the server reached.
func formatResponse(r *queryResponse) string {
	var b strings.Builder
	for i, res := range r.Results {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(formatResult(res))
	}
	fmt.Fprintf(&b, "seq %d, tick %d\n", r.Seq, r.Tick)
	return b.String()
}

// formatResult renders one statement result. A result with columns becomes an aligned
// table with a footer counting the rows; one without (a write) becomes "OK". Non-zero
// statistics follow in parentheses.
func formatResult(r result) string {
	var b strings.Builder
	notes := formatStats(r.Stats)
	if len(r.Columns) == 0 {
		b.WriteString("OK")
		if notes != "" {
			b.WriteString(" (" + notes + ")")
		}
		b.WriteByte('\n')
		return b.String()
	}
	b.WriteString(formatTable(r.Columns, r.Rows))
	n := len(r.Rows)
	footer := fmt.Sprintf("%d rows", n)
	if n == 1 {
		footer = "1 row"
	}
	if notes != "" {
		footer += "; " + notes
	}
	b.WriteString("(" + footer + ")\n")
	return b.String()
}

// formatTable lays out columns and rows with a header rule, cells separated by " | ".
// A column whose non-null cells are all numbers is right-aligned.
func formatTable(columns []string, rows [][]json.RawMessage) string {
	cells := make([][]string, len(rows))
	widths := make([]int, len(columns))
	numeric := make([]bool, len(columns))
	for i, c := range columns {
		widths[i] = width(c)
		numeric[i] = true
	}
	for r, row := range rows {
		cells[r] = make([]string, len(columns))
		for i := range columns {
			var raw json.RawMessage
			if i < len(row) {
				raw = row[i]
			}
			text, isNum, isNull := cell(raw)
			if !isNum && !isNull {
				numeric[i] = false
			}
			cells[r][i] = text
			widths[i] = max(widths[i], width(text))
		}
	}
	var b strings.Builder
	line := func(vals []string, header bool) {
		for i, v := range vals {
			if i > 0 {
				b.WriteString(" |")
			}
			b.WriteByte(' ')
			pad := strings.Repeat(" ", widths[i]-width(v))
			if numeric[i] && !header {
				b.WriteString(pad + v)
			} else if i == len(vals)-1 {
				b.WriteString(v) // no trailing blanks
			} else {
				b.WriteString(v + pad)
			}
		}
		b.WriteByte('\n')
	}
	line(columns, true)
	for i, w := range widths {
		if i > 0 {
			b.WriteByte('+')
		}
		b.WriteString(strings.Repeat("-", w+2))
	}
	b.WriteByte('\n')
	for _, row := range cells {
		line(row, false)
	}
	return b.String()
}

// cell renders one JSON value for a table: strings without quotes (control characters
// escaped so rows stay on one line), Bytes ({"$bytes": …}) as 0x and their bytes in
// hexadecimal, as herald.Value.String writes them, and everything else as compact JSON.
func cell(raw json.RawMessage) (text string, isNum, isNull bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "null", false, true
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return escapeControls(s), false, false
		}
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return string(raw), true, false
	case '{':
		if b, ok := bytesCell(raw); ok {
			return b, false, false
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err == nil {
		return buf.String(), false, false
	}
	return string(raw), false, false
}

// bytesCell renders raw when it is the JSON form of a Bytes value.
func bytesCell(raw json.RawMessage) (string, bool) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", false
	}
	v, err := herald.FromJSON(obj)
	if err != nil || v.Kind() != herald.KindBytes {
		return "", false
	}
	return v.String(), true
}

// jsonMap returns m, a match as the client hands it out, with every []byte in it (a
// Bytes value) in the JSON API's form {"$bytes": "<base64>"}, not as the bare base64
// string encoding/json would make of it, which no one could tell from a String.
func jsonMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = jsonValue(v)
	}
	return out
}

func jsonValue(x any) any {
	switch t := x.(type) {
	case []byte:
		return herald.Bytes(t)
	case map[string]any:
		return jsonMap(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = jsonValue(e)
		}
		return out
	}
	return x
}

func escapeControls(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func width(s string) int { return utf8.RuneCountInString(s) }

// formatStats lists the non-zero statistics as "nodes created: 1, plan: scan Job".
func formatStats(s stats) string {
	var parts []string
	for _, st := range s {
		text, isNum, isNull := cell(st.Value)
		if isNull || text == "" || (isNum && text == "0") || text == "false" {
			continue
		}
		parts = append(parts, strings.ReplaceAll(st.Key, "_", " ")+": "+text)
	}
	return strings.Join(parts, ", ")
}

// formatError renders an error answer. When it points into the query, the offending
// line is quoted with a caret under the column (1-based, counted in bytes).
func formatError(query string, e *herald.Error) string {
	var b strings.Builder
	b.WriteString("ERROR " + errorText(e) + "\n")
	if e.Line <= 0 {
		return b.String()
	}
	lines := strings.Split(query, "\n")
	if e.Line > len(lines) {
		return b.String()
	}
	src := strings.TrimRight(lines[e.Line-1], "\r")
	col := min(max(e.Column, 1), len(src)+1)
	var pad strings.Builder
	for _, r := range src[:col-1] {
		if r == '\t' {
			pad.WriteByte('\t')
		} else {
			pad.WriteByte(' ')
		}
	}
	num := strconv.Itoa(e.Line)
	gutter := strings.Repeat(" ", len(num))
	fmt.Fprintf(&b, " %s | %s\n", num, src)
	fmt.Fprintf(&b, " %s | %s^\n", gutter, pad.String())
	return b.String()
}

// complete reports whether text ends a statement: its last significant character, outside
// string literals and -- comments, is a semicolon.
func complete(text string) bool {
	last := byte(0)
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '"' || c == '\'':
			quote := c
			for i++; i < len(text) && text[i] != quote; i++ {
				if text[i] == '\\' {
					i++
				}
			}
			last = quote
		case c == '-' && i+1 < len(text) && text[i+1] == '-':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			last = c
		}
	}
	return last == ';'
}
