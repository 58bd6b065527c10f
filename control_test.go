package herald

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

func TestVerdictOf(t *testing.T) {
	cause := io.ErrUnexpectedEOF
	cases := []struct {
		name  string
		err   error
		want  Verdict
		delay time.Duration
	}{
		{"nil", nil, VerdictNone, 0},
		{"plain", cause, VerdictNone, 0},
		{"nack after", NackAfter(cause, 5*time.Second), VerdictNack, 5 * time.Second},
		{"nack after nil cause", NackAfter(nil, time.Second), VerdictNack, time.Second},
		{"negative delay", NackAfter(cause, -time.Second), VerdictNack, 0},
		{"reject", Reject(cause), VerdictReject, 0},
		{"reject nil cause", Reject(nil), VerdictReject, 0},
		{"wrapped nack", fmt.Errorf("job 7: %w", NackAfter(cause, time.Minute)), VerdictNack, time.Minute},
		{"wrapped reject", fmt.Errorf("job 7: %w", Reject(cause)), VerdictReject, 0},
		{"outermost wins", Reject(NackAfter(cause, time.Second)), VerdictReject, 0},
		{"outermost wins nack", NackAfter(Reject(cause), time.Second), VerdictNack, time.Second},
		{"joined", errors.Join(cause, Reject(cause)), VerdictReject, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, d := VerdictOf(c.err)
			if v != c.want || d != c.delay {
				t.Fatalf("VerdictOf(%v) = %v, %v; want %v, %v", c.err, v, d, c.want, c.delay)
			}
		})
	}
}

func TestControlErrorsKeepTheirCause(t *testing.T) {
	cause := io.ErrUnexpectedEOF
	for _, err := range []error{NackAfter(cause, time.Second), Reject(cause)} {
		if !errors.Is(err, cause) {
			t.Errorf("errors.Is(%v, cause) = false", err)
		}
	}
	var na *NackAfterError
	if !errors.As(fmt.Errorf("x: %w", NackAfter(cause, 3*time.Second)), &na) || na.Delay != 3*time.Second {
		t.Fatalf("errors.As did not find the NackAfterError: %+v", na)
	}
	var rj *RejectError
	if !errors.As(fmt.Errorf("x: %w", Reject(cause)), &rj) || rj.Err != cause {
		t.Fatalf("errors.As did not find the RejectError: %+v", rj)
	}
}

func TestControlErrorMessages(t *testing.T) {
	cases := map[string]error{
		"redeliver after 5s: unexpected EOF": NackAfter(io.ErrUnexpectedEOF, 5*time.Second),
		"redeliver after 1s":                 NackAfter(nil, time.Second),
		"reject: unexpected EOF":             Reject(io.ErrUnexpectedEOF),
		"reject":                             Reject(nil),
	}
	for want, err := range cases {
		if got := err.Error(); got != want {
			t.Errorf("Error() = %q, want %q", got, want)
		}
	}
	for v, want := range map[Verdict]string{VerdictNone: "none", VerdictNack: "nack", VerdictReject: "reject"} {
		if v.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(v), v.String(), want)
		}
	}
}
