package herald

import (
	"errors"
	"fmt"
	"sort"
)

// Code is a stable error code such as "E8004". Codes never change meaning once released.
type Code string

// Error codes. E8001–E8007 belong to the WATCH family; the others follow the same style:
// E1xxx language, E2xxx data and schema, E3xxx transactions and sessions, E4xxx requests,
// E5xxx server, E6xxx change log.
const (
	CodeWatchPatternDenied  Code = "E8001"
	CodeWatchNotFound       Code = "E8002"
	CodeAckTimeout          Code = "E8003"
	CodeInvalidDeliveryID   Code = "E8004"
	CodeWatchBufferOverflow Code = "E8005"
	CodeWatchLimitExceeded  Code = "E8006"
	CodeDeadLetterFailed    Code = "E8007"

	CodeSyntax          Code = "E1001"
	CodeNestingTooDeep  Code = "E1002"
	CodeUnknownVariable Code = "E1003"
	CodeInvalidQuery    Code = "E1004"

	CodeTypeMismatch      Code = "E2001"
	CodeRequiredAttribute Code = "E2002"
	CodeSealedType        Code = "E2003"
	CodeDuplicateID       Code = "E2004"
	CodeNodeNotFound      Code = "E2005"
	CodeTypeConflict      Code = "E2006"
	CodeEndpointMismatch  Code = "E2007"
	CodeEvaluation        Code = "E2008"
	CodeUnknownAttribute  Code = "E2009"
	CodeConstraint        Code = "E2010"
	CodeNoConstraint      Code = "E2011"
	CodeUnknownType       Code = "E2012"
	CodeAttributeInUse    Code = "E2013"

	CodeTxState    Code = "E3001"
	CodeTxConflict Code = "E3002"
	CodeSession    Code = "E3003"
	CodeNoSession  Code = "E3004"

	CodeMalformedRequest Code = "E4001"
	CodeEmptyQuery       Code = "E4002"
	CodeUnknownParameter Code = "E4003"
	CodeMissingParameter Code = "E4004"
	CodeBodyTooLarge     Code = "E4005"
	CodeNotImplemented   Code = "E4006"
	CodeNotFound         Code = "E4007"
	CodeMethodNotAllowed Code = "E4008"
	CodeStreamRequired   Code = "E4009"
	CodeUnknownStatement Code = "E4010"
	CodeCancelled        Code = "E4011"
	CodeStatementLimit   Code = "E4012"
	CodePermissionDenied Code = "E4013"
	CodeUnauthenticated  Code = "E4014"
	CodeRateLimited      Code = "E4015"
	CodeBodyTimeout      Code = "E4016"
	CodeClientSetup      Code = "E4017"
	CodeClientClosed     Code = "E4018"
	CodeInvalidArgument  Code = "E4019"
	CodeAlreadySettled   Code = "E4020"
	CodeQueueLocked      Code = "E4021"
	CodeLockExpired      Code = "E4022"
	CodeOutcomeUnknown   Code = "E4023"
	CodeUnknownMethod    Code = "E4024"
	CodeUnreachable      Code = "E4025"

	CodeInternal     Code = "E5001"
	CodeStorage      Code = "E5002"
	CodeShuttingDown Code = "E5003"
	CodeReadFailed   Code = "E5004"
	CodeStorageFull  Code = "E5005"
	CodeNotLeader    Code = "E5006"

	CodeCompacted     Code = "E6001"
	CodePositionAhead Code = "E6002"
)

// CodeInfo is one row of the error table: a code's name, HTTP status and RPC code.
type CodeInfo struct {
	Code    Code
	Name    string
	HTTP    int
	RPC     string // Connect/gRPC code name, e.g. "invalid_argument"
	Summary string
}

// codeTable is the one table that maps codes to transports. docs/errors.md is checked
// against it by a test.
var codeTable = []CodeInfo{
	{CodeWatchPatternDenied, "WATCH_PATTERN_DENIED", 403, "permission_denied", "a policy forbids the watch pattern"},
	{CodeWatchNotFound, "WATCH_NOT_FOUND", 404, "not_found", "the watch handle is unknown or cancelled"},
	{CodeAckTimeout, "ACK_TIMEOUT", 408, "deadline_exceeded", "the lease expired before it was settled"},
	{CodeInvalidDeliveryID, "INVALID_DELIVERY_ID", 404, "not_found", "the delivery id is unknown, settled or expired"},
	{CodeWatchBufferOverflow, "WATCH_BUFFER_OVERFLOW", 429, "resource_exhausted", "the watch buffer is full and on_full is error"},
	{CodeWatchLimitExceeded, "WATCH_LIMIT_EXCEEDED", 429, "resource_exhausted", "too many watches for the session or the server"},
	{CodeDeadLetterFailed, "DEAD_LETTER_FAILED", 409, "failed_precondition", "the dead-letter destination is missing or rejected the letter"},

	{CodeSyntax, "SYNTAX_ERROR", 400, "invalid_argument", "the query does not parse"},
	{CodeNestingTooDeep, "NESTING_TOO_DEEP", 400, "invalid_argument", "expressions are nested deeper than the parser allows"},
	{CodeUnknownVariable, "UNKNOWN_VARIABLE", 400, "invalid_argument", "a variable is used that the pattern does not bind"},
	{CodeInvalidQuery, "INVALID_QUERY", 400, "invalid_argument", "the statement parses but cannot be executed as written"},

	{CodeTypeMismatch, "TYPE_MISMATCH", 400, "invalid_argument", "a value does not have the declared or expected type"},
	{CodeRequiredAttribute, "REQUIRED_ATTRIBUTE", 400, "invalid_argument", "a [required] attribute is missing or null"},
	{CodeSealedType, "SEALED_TYPE", 403, "permission_denied", "system (`_`) and [sealed] types cannot be written by users"},
	{CodeDuplicateID, "DUPLICATE_ID", 409, "already_exists", "a node with that id already exists"},
	{CodeNodeNotFound, "NODE_NOT_FOUND", 404, "not_found", "a referenced node does not exist"},
	{CodeTypeConflict, "TYPE_CONFLICT", 409, "already_exists", "a type is declared twice with different definitions, or as node and edge"},
	{CodeEndpointMismatch, "ENDPOINT_MISMATCH", 400, "invalid_argument", "an edge endpoint has the wrong type or the edge the wrong arity"},
	{CodeEvaluation, "EVALUATION_ERROR", 400, "invalid_argument", "an expression cannot be evaluated (bad operands, division by zero, unknown function)"},
	{CodeUnknownAttribute, "UNKNOWN_ATTRIBUTE", 400, "invalid_argument", "an attribute is not declared on its type"},
	{CodeConstraint, "CONSTRAINT_VIOLATION", 409, "failed_precondition", "the commit (or a new constraint) would leave a binding that breaks a constraint"},
	{CodeNoConstraint, "CONSTRAINT_NOT_FOUND", 404, "not_found", "DROP CONSTRAINT names no declared constraint"},
	{CodeUnknownType, "UNKNOWN_TYPE", 400, "invalid_argument", "a pattern names a type that is not declared and that no node or edge has (a WATCH gets a warning event instead, and waits for it)"},
	{CodeAttributeInUse, "ATTRIBUTE_IN_USE", 409, "failed_precondition", "a type change would remove or narrow an attribute that nodes still hold, or make required one they lack; the message names the attribute and counts the nodes"},

	{CodeTxState, "TRANSACTION_STATE", 409, "failed_precondition", "BEGIN inside a transaction, COMMIT or ROLLBACK outside one, and similar"},
	{CodeTxConflict, "TRANSACTION_CONFLICT", 409, "aborted", "a concurrent transaction changed what this one wrote; retry"},
	{CodeSession, "SESSION_ERROR", 400, "failed_precondition", "session misuse: nested sessions, END SESSION without one"},
	{CodeNoSession, "SESSION_NOT_FOUND", 404, "not_found", "the session id is unknown, closed or expired"},

	{CodeMalformedRequest, "MALFORMED_REQUEST", 400, "invalid_argument", "the request body is not the expected JSON, or a query parameter has a value the endpoint does not take"},
	{CodeEmptyQuery, "EMPTY_QUERY", 400, "invalid_argument", "the request holds no statement"},
	{CodeUnknownParameter, "UNKNOWN_PARAMETER", 400, "invalid_argument", "a parameter was supplied that the query does not use"},
	{CodeMissingParameter, "MISSING_PARAMETER", 400, "invalid_argument", "the query uses a parameter that was not supplied"},
	{CodeBodyTooLarge, "BODY_TOO_LARGE", 413, "resource_exhausted", "the request body exceeds the configured limit"},
	{CodeNotImplemented, "NOT_IMPLEMENTED", 501, "unimplemented", "the statement parses but this server does not execute it yet"},
	{CodeNotFound, "NOT_FOUND", 404, "not_found", "no such endpoint, or (queue REST API) no acknowledgement lock on the queue"},
	{CodeMethodNotAllowed, "METHOD_NOT_ALLOWED", 405, "unimplemented", "the endpoint does not accept this HTTP method"},
	{CodeStreamRequired, "STREAM_REQUIRED", 400, "invalid_argument", "WATCH needs a streaming endpoint (GET /v1/watch or the Consume RPC), not POST /v1/query"},
	{CodeUnknownStatement, "UNKNOWN_STATEMENT", 404, "not_found", "no prepared statement has that name (never prepared, dropped, or the server restarted): prepare it again"},
	{CodeCancelled, "STATEMENT_CANCELLED", 499, "canceled", "the client went away while the statement ran, and it was stopped"},
	{CodeStatementLimit, "STATEMENT_LIMIT", 422, "resource_exhausted", "the statement ran past the server's time limit or scanned past its row limit, and was stopped"},
	{CodePermissionDenied, "PERMISSION_DENIED", 403, "permission_denied", "the principal lacks the grant the request needs"},
	{CodeUnauthenticated, "UNAUTHENTICATED", 401, "unauthenticated", "the request carries no valid credentials (a bearer token or a client certificate)"},
	{CodeRateLimited, "RATE_LIMITED", 429, "resource_exhausted", "the principal is over its request rate; retry after the time Retry-After gives"},
	{CodeBodyTimeout, "BODY_TIMEOUT", 408, "deadline_exceeded", "the request body did not arrive within the server's body timeout"},
	{CodeClientSetup, "CLIENT_SETUP", 400, "failed_precondition", "the Go client is set up in a way that cannot work (an HTTP client without HTTP/2, a message without a subscription); raised by the client, not the server"},
	{CodeClientClosed, "CLIENT_CLOSED", 400, "failed_precondition", "the Go client, or the subscription the call belongs to, is closed; nothing was sent. Raised by the client"},
	{CodeInvalidArgument, "INVALID_ARGUMENT", 400, "invalid_argument", "a call of the Go client got an argument or option it cannot use (a nil handler, a negative prefetch, a publish type that is not an identifier); nothing was sent. Raised by the client"},
	{CodeAlreadySettled, "ALREADY_SETTLED", 409, "failed_precondition", "the message was settled already (a second Ack, Nack or Reject); the Go client makes one settlement per delivery and sends no other"},
	{CodeQueueLocked, "QUEUE_LOCKED", 423, "failed_precondition", "the queue has an active lock: pops are refused until it is acknowledged, released or expires (the queue REST API answers 423 with the lock's expiry)"},
	{CodeLockExpired, "LOCK_EXPIRED", 410, "failed_precondition", "the queue lock expired before it was acknowledged or released; its items are back in the queue (the queue REST API answers 410 with error_code LOCK_EXPIRED)"},
	{CodeOutcomeUnknown, "OUTCOME_UNKNOWN", 503, "unavailable", "the stream or connection ended before the server answered: the request (a settlement) may or may not have taken effect. Raised by the client"},
	{CodeUnknownMethod, "UNKNOWN_METHOD", 404, "unimplemented", "an RPC (gRPC or Connect) names a procedure this server does not have; server reflection lists those it has"},
	{CodeUnreachable, "UNREACHABLE", 503, "unavailable", "no answer came from the server: the connection was refused, its name did not resolve, or the request timed out before an answer. Raised by the client (Client.Status, herald status), never sent by a server"},

	{CodeInternal, "INTERNAL", 500, "internal", "an unexpected server fault"},
	{CodeStorage, "STORAGE_FAILED", 503, "unavailable", "the store failed; the server refuses writes until restarted"},
	{CodeShuttingDown, "SHUTTING_DOWN", 503, "unavailable", "the server is stopping"},
	{CodeReadFailed, "READ_FAILED", 500, "internal", "a value kept in the store (a node's body) could not be read back"},
	{CodeStorageFull, "STORAGE_FULL", 507, "resource_exhausted", "the store's disk is below its free-space reserve: writes are refused until space is freed; reads go on"},
	{CodeNotLeader, "NOT_LEADER", 503, "unavailable", "this node follows the leader and serves reads and watch-mode streams only: send writes, consume streams and settlements to the leader, whose address the error carries"},

	{CodeCompacted, "CHANGES_COMPACTED", 410, "out_of_range", "the requested change-log position is older than the retention horizon"},
	{CodePositionAhead, "POSITION_AHEAD", 409, "out_of_range", "the requested position is ahead of the server's: its data is older than what the client saw"},
}

var codeIndex = func() map[Code]CodeInfo {
	m := make(map[Code]CodeInfo, len(codeTable))
	for _, c := range codeTable {
		m[c.Code] = c
	}
	return m
}()

// Codes returns the error table sorted by code.
func Codes() []CodeInfo {
	out := append([]CodeInfo(nil), codeTable...)
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// Info returns the table row of c; unknown codes map to INTERNAL.
func (c Code) Info() CodeInfo {
	if i, ok := codeIndex[c]; ok {
		return i
	}
	return codeIndex[CodeInternal]
}

// Name returns the symbolic name of c, e.g. "INVALID_DELIVERY_ID".
func (c Code) Name() string { return c.Info().Name }

// Error returns the code itself ("E8003"). A Code is an error so that it can be the
// target of errors.Is: errors.Is(err, herald.CodeAckTimeout) reports whether an *Error
// with that code is in err's chain, whoever built it and on whichever side of the wire.
func (c Code) Error() string { return string(c) }

// Error is Herald's error: a stable code, a message, an optional source position (for
// errors tied to query text), and an optional wrapped cause.
type Error struct {
	Code    Code
	Message string
	Line    int // 1-based; 0 when the error has no position
	Column  int // 1-based, in bytes
	Err     error
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// At returns a copy of e positioned at line:col.
func (e *Error) At(line, col int) *Error {
	c := *e
	c.Line, c.Column = line, col
	return &c
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s %s: %d:%d: %s", e.Code, e.Code.Name(), e.Line, e.Column, e.Message)
	}
	return fmt.Sprintf("%s %s: %s", e.Code, e.Code.Name(), e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Is lets errors.Is match e by its code: against a Code (errors.Is(err,
// herald.CodeAckTimeout)), or against an *Error that carries only a code
// (&herald.Error{Code: …}). An *Error with a message, such as a package's sentinel,
// matches only itself.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Code:
		return e.Code == t
	case *Error:
		return t.Code == e.Code && t.Message == ""
	}
	return false
}

// CodeOf returns the code of the first *Error in err's chain, CodeInternal for an error
// without one, and "" for nil.
func CodeOf(err error) Code {
	switch e := err.(type) {
	case nil:
		return "" // no error, no code
	case *Error:
		return e.Code // without errors.As, whose target escapes: no allocation
	case Code:
		return e
	}
	var he *Error
	if errors.As(err, &he) {
		return he.Code
	}
	var c Code
	if errors.As(err, &c) {
		return c
	}
	return CodeInternal
}

// AsError returns err as an *Error: the first in its chain, an *Error of a bare Code
// (its summary as the message), or foreign errors wrapped as INTERNAL.
func AsError(err error) *Error {
	var he *Error
	if errors.As(err, &he) {
		return he
	}
	var c Code
	if errors.As(err, &c) {
		return &Error{Code: c, Message: c.Info().Summary, Err: err}
	}
	return &Error{Code: CodeInternal, Message: err.Error(), Err: err}
}
