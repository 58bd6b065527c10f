package herald

import (
	"errors"
	"fmt"
	"testing"
)

// A Code is an errors.Is target: it matches an *Error with that code anywhere in the
// chain, and nothing else.
func TestCodeIsAnErrorsIsTarget(t *testing.T) {
	timeout := fmt.Errorf("settling: %w", &Error{Code: CodeAckTimeout, Message: "the lease expired"})
	for _, tc := range []struct {
		err    error
		target error
		want   bool
	}{
		{timeout, CodeAckTimeout, true},
		{timeout, CodeInvalidDeliveryID, false},
		{&Error{Code: CodeSyntax, Message: "x"}, CodeSyntax, true},
		{errors.Join(errors.New("other"), &Error{Code: CodeQueueLocked}), CodeQueueLocked, true},
		{errors.New("E8003"), CodeAckTimeout, false}, // the text alone is not the code
		{CodeClientClosed, CodeClientClosed, true},
		{fmt.Errorf("wrapped: %w", CodeClientClosed), CodeClientClosed, true},
		{CodeClientClosed, CodeAlreadySettled, false},
		{nil, CodeInternal, false},
	} {
		if got := errors.Is(tc.err, tc.target); got != tc.want {
			t.Errorf("errors.Is(%v, %s) = %v, want %v", tc.err, tc.target, got, tc.want)
		}
	}
}

// An *Error target with a code only still matches by code; one with a message (a
// sentinel) matches only itself.
func TestErrorTargets(t *testing.T) {
	sentinel := &Error{Code: CodeClientClosed, Message: "client: closed"}
	other := &Error{Code: CodeClientClosed, Message: "client: subscription closed"}
	if !errors.Is(fmt.Errorf("x: %w", other), &Error{Code: CodeClientClosed}) {
		t.Error("a code-only *Error target does not match by code")
	}
	if errors.Is(other, sentinel) || !errors.Is(fmt.Errorf("x: %w", sentinel), sentinel) {
		t.Error("a sentinel matches another error of its code, or not itself")
	}
}

func TestCodeOfAndAsErrorTakeBareCodes(t *testing.T) {
	if got := CodeOf(fmt.Errorf("x: %w", CodeInvalidArgument)); got != CodeInvalidArgument {
		t.Errorf("CodeOf(wrapped Code) = %s", got)
	}
	if got := CodeOf(CodeLockExpired); got != CodeLockExpired {
		t.Errorf("CodeOf(Code) = %s", got)
	}
	e := AsError(CodeQueueLocked)
	if e.Code != CodeQueueLocked || e.Message != CodeQueueLocked.Info().Summary {
		t.Errorf("AsError(Code) = %+v", e)
	}
	if s := fmt.Sprintf("%s %v", CodeAckTimeout, CodeAckTimeout); s != "E8003 E8003" {
		t.Errorf("a Code prints as %q, want the code itself", s)
	}
}

// The client's own codes and the queue contract's refusals have rows of their own, so
// that none of them reads as INTERNAL.
func TestClientCodesHaveRows(t *testing.T) {
	names := map[string]bool{}
	for _, c := range Codes() {
		if names[c.Name] {
			t.Errorf("name %s is used twice", c.Name)
		}
		names[c.Name] = true
	}
	for code, name := range map[Code]string{
		CodeClientSetup: "CLIENT_SETUP", CodeClientClosed: "CLIENT_CLOSED", CodeInvalidArgument: "INVALID_ARGUMENT",
		CodeAlreadySettled: "ALREADY_SETTLED", CodeQueueLocked: "QUEUE_LOCKED", CodeLockExpired: "LOCK_EXPIRED",
		CodeOutcomeUnknown: "OUTCOME_UNKNOWN", CodeUnreachable: "UNREACHABLE",
	} {
		if code.Name() != name {
			t.Errorf("%s is %s, want %s", code, code.Name(), name)
		}
	}
	if CodeQueueLocked.Info().HTTP != 423 || CodeLockExpired.Info().HTTP != 410 {
		t.Error("the queue contract's refusals keep its statuses, 423 and 410")
	}
}
