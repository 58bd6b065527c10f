package client

import (
	"fmt"

	"github.com/herald-mq/herald"
)

// The client's sentinel errors are *herald.Error values with codes of their own, so
// that herald.CodeOf and errors.Is against a herald.Code classify them as they do the
// server's errors; errors.Is against the sentinel itself still picks out that one.
var (
	// ErrClosed is returned by calls on a closed Client (E4018).
	ErrClosed = &herald.Error{Code: herald.CodeClientClosed, Message: "client: closed"}
	// ErrSubscriptionClosed is the cause of handler contexts cancelled because Close gave
	// up waiting for them (E4018).
	ErrSubscriptionClosed = &herald.Error{Code: herald.CodeClientClosed, Message: "client: subscription closed"}
	// ErrSettled is matched by a second Ack, Nack, NackAfter or Reject of a message: a
	// message settles at most once, and the later calls return without calling the
	// server (E4020).
	ErrSettled = &herald.Error{Code: herald.CodeAlreadySettled, Message: "client: message already settled"}
	// ErrLeaseExpired is matched by every settlement and Extend of a message once the
	// server has reported its lease gone (a timeout event), again without a call. The
	// error is the server's own (E8003, herald.CodeAckTimeout), wrapping this one.
	ErrLeaseExpired = &herald.Error{Code: herald.CodeAckTimeout, Message: "client: lease expired"}
)

// invalid is the error of a call given an argument or option it cannot use (E4019).
func invalid(format string, args ...any) *herald.Error {
	return herald.Errorf(herald.CodeInvalidArgument, "client: "+format, args...)
}

// setupError is the error of a client that cannot work as configured (E4017), with the
// underlying cause kept for errors.Is and errors.As.
func setupError(cause error, format string, args ...any) *herald.Error {
	msg := fmt.Sprintf("client: "+format, args...)
	if cause != nil {
		msg += ": " + cause.Error()
	}
	return &herald.Error{Code: herald.CodeClientSetup, Message: msg, Err: cause}
}
