package client

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The client does not import the query language's parser (it would pull the server's
// packages into every consumer), so what Subscribe needs to know about a WATCH
// statement it reads with this small tokenizer: which options it sets, and where an
// option list may be added.

type wtok struct {
	text       string
	start, end int
	kind       byte // 'w' word, 's' string, 'p' punctuation
	inOptions  bool // directly inside [ … ]
	depth      int  // bracket depth before the token
	afterDot   bool
	beforeColn bool
}

func tokenizeWatch(src string) ([]wtok, error) {
	var toks []wtok
	var stack []byte
	for i := 0; i < len(src); {
		r, size := utf8.DecodeRuneInString(src[i:])
		switch {
		case unicode.IsSpace(r):
			i += size
			continue
		case r == '-' && strings.HasPrefix(src[i:], "--"):
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		}
		t := wtok{start: i, depth: len(stack), inOptions: len(stack) > 0 && stack[len(stack)-1] == '['}
		switch {
		case r == '"':
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(src) {
				return nil, errors.New("client: unterminated string in the WATCH statement")
			}
			t.kind, t.end = 's', j+1
		case r == '_' || r == '$' || r == '#' || unicode.IsLetter(r) || unicode.IsDigit(r):
			j := i + size
			for j < len(src) {
				r2, s2 := utf8.DecodeRuneInString(src[j:])
				if !(r2 == '_' || r2 == '.' && r == '#' || unicode.IsLetter(r2) || unicode.IsDigit(r2)) {
					break
				}
				j += s2
			}
			t.kind, t.end = 'w', j
		default:
			t.kind, t.end = 'p', i+size
			switch r {
			case '[', '(', '{':
				stack = append(stack, byte(r))
			case ']', ')', '}':
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				}
			}
		}
		t.text = src[t.start:t.end]
		if n := len(toks); n > 0 && toks[n-1].text == "." {
			t.afterDot = true
		}
		if n := len(toks); n > 0 && t.text == ":" {
			toks[n-1].beforeColn = true
		}
		toks = append(toks, t)
		i = t.end
	}
	return toks, nil
}

// watchInfo is what Subscribe reads from a WATCH statement.
type watchInfo struct {
	consume    bool   // [mode: consume] is present
	flowOption string // "buffer" or "max_in_flight" when set, else ""
	insertAt   int    // where an option list may be inserted
}

func inspectWatch(src string) (watchInfo, error) {
	toks, err := tokenizeWatch(src)
	if err != nil {
		return watchInfo{}, err
	}
	var wi watchInfo
	sawWatch := false
	wi.insertAt = -1
	for i, t := range toks {
		word := strings.ToLower(t.text)
		if t.kind == 'w' && word == "watch" && t.depth == 0 {
			sawWatch = true
		}
		if t.kind == 'w' && t.inOptions && t.beforeColn && !t.afterDot {
			switch word {
			case "mode":
				if i+2 < len(toks) && strings.EqualFold(toks[i+2].text, "consume") {
					wi.consume = true
				}
			case "max_in_flight":
				wi.flowOption = "max_in_flight"
			case "buffer":
				if wi.flowOption == "" {
					wi.flowOption = "buffer"
				}
			}
		}
		if wi.insertAt < 0 && sawWatch && t.kind == 'w' && t.depth == 0 && !t.afterDot && (word == "return" || word == "on") {
			wi.insertAt = t.start
		}
	}
	if !sawWatch {
		return wi, errors.New("client: Subscribe needs a WATCH statement")
	}
	if wi.insertAt < 0 {
		// After the last token that is not a closing semicolon.
		end := len(toks) - 1
		for end >= 0 && toks[end].text == ";" && toks[end].depth == 0 {
			end--
		}
		wi.insertAt = toks[end].end
	}
	return wi, nil
}

// prepareWatch checks that statement is a consume-mode WATCH and, when prefetch > 0,
// adds [max_in_flight: prefetch] to it. A statement that already caps its deliveries
// with max_in_flight conflicts with a prefetch; one with buffer gets max_in_flight
// added, and the smaller cap applies.
func prepareWatch(statement string, prefetch int) (string, error) {
	wi, err := inspectWatch(statement)
	if err != nil {
		return "", err
	}
	if !wi.consume {
		return "", errors.New("client: Subscribe needs a consume-mode watch: add [mode: consume]")
	}
	if prefetch <= 0 {
		return statement, nil
	}
	if wi.flowOption == "max_in_flight" {
		return "", errors.New("client: WithPrefetch conflicts with the statement's max_in_flight option; use one of them")
	}
	opt := fmt.Sprintf("[max_in_flight: %d]", prefetch)
	before, after := strings.TrimRight(statement[:wi.insertAt], " \t\r\n"), statement[wi.insertAt:]
	if after != "" && !unicode.IsSpace(rune(after[0])) {
		after = " " + after
	}
	return before + " " + opt + after, nil
}
