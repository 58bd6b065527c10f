package herald

import (
	"errors"
	"fmt"
	"time"
)

// Control-flow errors let a message handler choose how its message is settled by the
// error it returns, whatever the subscription's ack policy would do by default. Wrap
// the cause: NackAfter(err, 5*time.Second) asks for a redelivery in five seconds,
// Reject(err) sends the message to the dead letters. Both keep err in their chain, so
// errors.Is and errors.As still find it.

// NackAfterError asks for the message to be returned to its queue and redelivered no
// earlier than Delay from now (a NACK with [delay: Delay]; a zero Delay is a plain NACK,
// which follows the watch's backoff). Create it with NackAfter.
type NackAfterError struct {
	Err   error
	Delay time.Duration
}

// NackAfter wraps err into a request to redeliver the message after d. A nil err is
// allowed: the handler then only asks for the redelivery.
func NackAfter(err error, d time.Duration) error {
	if d < 0 {
		d = 0
	}
	return &NackAfterError{Err: err, Delay: d}
}

func (e *NackAfterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("redeliver after %v", e.Delay)
	}
	return fmt.Sprintf("redeliver after %v: %v", e.Delay, e.Err)
}

func (e *NackAfterError) Unwrap() error { return e.Err }

func (e *NackAfterError) verdict() (Verdict, time.Duration) { return VerdictNack, e.Delay }

// RejectError asks for the message to be dead-lettered at once, without a retry (a
// NACK with [no_retry]). Create it with Reject.
type RejectError struct {
	Err error
}

// Reject wraps err into a request to dead-letter the message. A nil err is allowed.
func Reject(err error) error { return &RejectError{Err: err} }

func (e *RejectError) Error() string {
	if e.Err == nil {
		return "reject"
	}
	return "reject: " + e.Err.Error()
}

func (e *RejectError) Unwrap() error { return e.Err }

func (e *RejectError) verdict() (Verdict, time.Duration) { return VerdictReject, 0 }

// Verdict is the settlement a handler's error asks for.
type Verdict int

// Verdicts, as read by VerdictOf.
const (
	VerdictNone   Verdict = iota // no control-flow error: the ack policy decides
	VerdictNack                  // NackAfter: redeliver, after the returned delay
	VerdictReject                // Reject: dead-letter without retry
)

func (v Verdict) String() string {
	switch v {
	case VerdictNack:
		return "nack"
	case VerdictReject:
		return "reject"
	}
	return "none"
}

// controlError is implemented by the control-flow errors.
type controlError interface {
	error
	verdict() (Verdict, time.Duration)
}

// VerdictOf returns the settlement err asks for: the first control-flow error in err's
// chain (outermost first, as errors.As searches) decides. For VerdictNack the delay is
// the one given to NackAfter; otherwise it is zero.
func VerdictOf(err error) (Verdict, time.Duration) {
	if err == nil {
		return VerdictNone, 0 // before c, which escapes: a handler's success allocates nothing
	}
	var c controlError
	if !errors.As(err, &c) {
		return VerdictNone, 0
	}
	return c.verdict()
}
