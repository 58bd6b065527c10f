package herald

import (
	"sort"
	"strings"
)

// WatchPolicy decides which WATCH patterns may run; a refusal is E8001
// WATCH_PATTERN_DENIED. Whatever the settings, consume mode may not take a system type
// (`_Watch`, `_DeadLetter`, …) as its subject: an ACK would delete server state.
type WatchPolicy struct {
	// DenyTypes are node and edge types no WATCH may mention, in either mode.
	DenyTypes []string
}

// Check refuses a pattern of the given mode ("watch" or "consume") whose subject (the
// first node variable's type; "" if none) and types (every node and edge type the
// pattern mentions) the policy forbids.
func (p WatchPolicy) Check(mode, subject string, types []string) *Error {
	if mode == "consume" && strings.HasPrefix(subject, "_") {
		return Errorf(CodeWatchPatternDenied, "consume mode cannot take the system type %s: acknowledging would delete server state; watch it in watch mode", subject)
	}
	if len(p.DenyTypes) == 0 {
		return nil
	}
	deny := map[string]bool{}
	for _, t := range p.DenyTypes {
		deny[t] = true
	}
	var hit []string
	for _, t := range types {
		if deny[t] {
			hit = append(hit, t)
		}
	}
	if len(hit) == 0 {
		return nil
	}
	sort.Strings(hit)
	return Errorf(CodeWatchPatternDenied, "the server's watch policy denies patterns on %s", strings.Join(hit, ", "))
}
