// Package client is the Go SDK of Herald: it runs queries, publishes messages (typed
// values through a codec), consumes consume-mode watches with a handler or a typed
// worker and an ack policy, and drives both queue APIs and the token administration.
// It speaks the herald.v1.Herald and herald.v1.Queues services over Connect, on
// HTTP/2, and the JSON API for the few calls that have no RPC (see Transport); the
// herald command line is built on it. docs/worker.md walks through a complete worker.
//
// # Typed payloads and workers
//
// Publish takes a struct as well as a map: the client's Codec (JSON's rules by
// default, Proto for protocol buffers, WithCodec for another) turns its fields into
// attributes of Herald's kinds — []byte stays Bytes, time.Time is a Timestamp — and
// Message.Decode reads a match back. A Worker[T] receives a *Job[T], the message with
// its payload decoded; Work starts one on a ConsumerConfig, and Typed adapts one to a
// Handler for Subscribe. WithDelay, WithPriority and WithFairnessKey set the attributes
// that a ConsumerConfig's AvailableAt, OrderBy (ByPriority) and Fairness read.
//
//	type Email struct{ To, Subject string }
//	_, err := c.Publish(ctx, "Email", Email{To: "ann@example.com"}, client.WithPriority(1))
//	sub, err := client.Work(ctx, c, client.ConsumerConfig{Type: "Email", Group: "mailers",
//		MaxAttempts: 5, Backoff: client.Exponential(time.Second, 2, time.Minute)},
//		client.WorkFunc[Email](func(ctx context.Context, j *client.Job[Email]) error {
//			return send(ctx, j.Payload)
//		}))
//
// A ConsumerConfig is the consume watch as Go values (group, filter, ordering,
// fairness, ack timeout, attempts, backoff, dead letter, prefetch, concurrency,
// policy); it builds its WATCH statement as a tree of the language and prints it, and
// Statement shows it. What it does not cover is written as a WATCH statement.
//
// # Consuming
//
// Subscribe starts a WATCH … [mode: consume] statement and calls the handler once per
// delivery:
//
//	sub, err := c.Subscribe(ctx, `WATCH j: Job [mode: consume] RETURN j`,
//		func(ctx context.Context, m *client.Message) error {
//			return process(m.Match["id"], m.Match["payload"]) // RETURN j: the node itself
//		},
//		client.WithPolicy(client.NackOnError), client.WithConcurrency(4))
//
// # Ack policies
//
// The policy decides how a message is settled around its handler; the names and meanings
// are FastStream's. "Ack" is ACK (the subject is deleted), "nack" is NACK (redelivered,
// attempt + 1, until max_redeliveries sends it to the dead letters), "reject" is
// NACK [no_retry] (dead-lettered at once). A recovered panic counts as an error.
//
//	Policy         on success        on error           NackAfter(err, d)   Reject(err)
//	AckFirst       acked on receipt, before the handler; its outcome changes nothing
//	Ack            ack               ack                nack after d        reject
//	RejectOnError  ack               reject             nack after d        reject
//	NackOnError    ack               nack               nack after d        reject
//	Manual         nothing           nothing            nack after d        reject
//
// NackOnError is the default. The two right-hand columns are the control-flow errors of
// the root package: a handler that returns herald.NackAfter(err, d) (d = 0: the watch's
// backoff) or herald.Reject(err), wrapped or not, gets that settlement under every
// policy but AckFirst, whose message is settled before the handler runs. When the
// handler has already settled the message itself (msg.Ack, msg.Nack, msg.NackAfter,
// msg.Reject), nothing automatic happens; with Manual that is the only way, and the
// handler may keep the message and settle it later from another goroutine.
//
// Under AckFirst a failed ACK (the lease expired, say) skips the handler: the message
// is not this subscriber's to process.
//
// Choosing one:
//
//   - NackOnError (the default) when a failure may be passing (a timeout, a service
//     that is down): the message is tried again, up to max_redeliveries, then kept as a
//     dead letter. Handlers must be idempotent, since a retried message may have been
//     partly processed.
//   - RejectOnError when a failure means the message itself is bad (it does not parse,
//     it breaks a rule): retrying cannot help, so it goes to the dead letters at once
//     for someone to inspect, and does not hold up the queue.
//   - Ack when losing a failed message is acceptable and retrying would only repeat the
//     failure (best-effort notifications, metrics); a handler may still ask for a retry
//     with herald.NackAfter.
//   - AckFirst for at-most-once processing: a message is never handled twice, but one
//     whose handler fails or whose process dies is lost. Use it only where a duplicate
//     costs more than a loss.
//   - Manual when the outcome is known only later or elsewhere (a batch written out
//     together, work handed to another goroutine): settle each message explicitly, and
//     Extend its lease while the work goes on.
//
// Ack and Nack wait until the server has made the settlement durable. AckAsync and
// NackAsync queue it and return a SettleFuture instead, so one handler can take the
// next message while the last one's settlement is syncing; the delivery counts against
// the prefetch until the server has answered, and one whose settlement fails comes back
// as any unsettled message does.
//
// When the handler's work is writing to Herald itself, Client.Transactional makes it
// exactly once: the handler writes through a Tx, and its writes commit together with
// the message's ACK, or not at all (the server refuses the commit when the lease is no
// longer current). Its failures go to the policy like any handler's.
//
// # Settlement
//
// Delivery is at least once: a message whose lease expires, whose subscriber
// disconnects, or that is nacked, is delivered again (Message.Attempt counts). Each
// delivery is settled at most once: the first Ack, Nack, NackAfter or Reject of a
// Message makes the one call to the server, and every later one returns ErrSettled
// without a call — even if the first failed, since its outcome cannot be known then.
// Extend pushes the lease's deadline and may be called repeatedly before settlement.
// Settling by delivery id also protects against stale settlements on the server: once
// a lease expires, its id answers E8004 (herald.CodeInvalidDeliveryID), and the
// redelivered message has a new id.
//
// Settlements are coalesced: those made while an earlier one is on its way to the
// server go together in one frame of the subscription's stream (one commit, one sync on
// the server), and each call still returns the server's answer for its own message.
//
// When the server reports a lease expired (a timeout event, E8003), the subscription
// cancels that message's handler context and refuses its settlements locally with an
// error matching ErrLeaseExpired and herald.CodeAckTimeout. Once a message is settled
// and its handler has returned, its handler context ends with the cause ErrSettled; a
// Manual message left unsettled keeps its context until it is settled or expires.
//
// # Logging
//
// A subscription reports what it cannot return — failed handlers, recovered panics,
// automatic settlements the server refused — to the client's logger (WithLogger),
// counted: one line per interval (WithReportInterval, DefaultReportInterval) at WARN
// (WithLogLevel sets the level per subscription) saying how many failed and how they
// were settled, with the last error, and each one on its own at DEBUG.
//
// # Flow control
//
// WithConcurrency(n) runs n handlers at once. WithPrefetch(n) caps how many unsettled
// messages the server leases to the subscription: the stream's credit (the statement's
// text is left as it is; SetPrefetch changes it later). The subscription
// reads its stream continuously, so timeout events reach it even while every handler
// is busy; delivered messages wait in order for a free handler.
//
// # Shutdown
//
// Cancelling the context given to Subscribe — a signal.NotifyContext on SIGINT, as a
// worker's main usually has it — drains the subscription: it takes no new message, the
// running handlers finish with their contexts intact and their messages are settled on
// a context of the client's own (the stream stays open meanwhile, so their leases
// hold), the messages received but not started are released, and the subscription ends
// (Done, with a nil Err). WithDrainTimeout bounds the wait; past it the handlers'
// contexts are cancelled and their messages left for redelivery.
//
// Subscription.Close does the same with the caller's deadline: it stops handing out
// messages, waits for the running handlers until its context is done, and then closes
// the stream. The server releases the leases of a closed stream at once, so whatever
// was not settled — queued messages, handlers cut off by the deadline, manual messages
// never settled — is redelivered promptly instead of waiting for its ack timeout. If
// the deadline passes, the handlers' contexts are cancelled with ErrSubscriptionClosed
// and Close returns the context's error. Client.Drain drains every subscription, waits
// for the publishes under way, and closes the client.
//
// A subscription on one server does not reconnect. When its stream ends on its own (the
// server stopped, the connection broke), Done is closed, Err says why, the running
// handlers' contexts are cancelled (their leases are released), and the caller may
// subscribe again.
//
// # Several nodes
//
// Dial takes every node of a cluster on one PostgreSQL store, comma-separated, and
// follows the leader from then on: a call a follower refuses with E5006 goes to the node
// it names, unreachable nodes are passed over, publishes a node refused go out again on
// the leader, a subscription whose stream is lost subscribes again there (the messages it
// held are redelivered when their leases run out), and watches resume from their last
// position on any node. A statement or publish whose connection broke on the way may
// have been carried out, and comes back as an error rather than running twice.
// WithFailoverTimeout bounds the search (docs/scale.md). A settlement sent on it but not yet answered returns E4023
// (herald.CodeOutcomeUnknown): it may have taken effect or not.
//
// # Queues
//
// Client.Queue returns a queue of the queue REST API (docs/queues.md): Push adds an
// item (any JSON value) with a priority, Pop takes the highest-priority items, either
// removing them at once or, with PopOptions.Lock, holding them under the queue's one
// lock until Acknowledge removes them or Release gives them back; a lock left alone
// expires and its items return to their place. Stats and Client.QueueStats count a
// queue's items, and DeadLetters lists the letters of items that other consume
// watches dead-lettered. The contract's refusals come back with codes: E4021 for a
// pop of a locked queue, E4022 for a lock that expired first, E4001 for a wrong lock
// id, E4007 for a queue without a lock.
//
// Client.NamedQueue is a queue of the queue RPC (herald.v1.Queues): Create declares it
// with a visibility timeout, an attempt limit, a dead-letter queue and fairness
// weights; Enqueue adds a message with a fairness key, a priority and a delay; Consume
// streams leased messages, settled by id with Ack, Nack and Extend; RedriveDeadLetters
// puts the dead letters back. Its values are the server's seam's (package broker).
//
// Client.DeadLetters, RedriveDeadLetters and PurgeDeadLetters work on the dead letters
// of every queue model at once — consume groups', the REST queues' items, the queue
// RPC's messages — selected by a DeadLetterFilter (queue, group, reason, type, age,
// limit). A redrive or a purge is one statement and one commit
// (`MATCH d: _DeadLetter WHERE … REDRIVE d`, `… KILL d`), and needs the admin grant.
//
// # Errors
//
// There is one error type, *herald.Error, with a stable code (docs/errors.md). What the
// server refuses comes back as the server's own *herald.Error, over either transport,
// with its position for errors in the query text. What the client refuses itself has
// a code of its own, never INTERNAL: E4017 for a client that cannot work as set up (an
// unreadable CA file, an HTTP client without HTTP/2), E4018 for a call on a closed
// client (ErrClosed) or subscription (ErrSubscriptionClosed), E4019 for an argument
// or option the call cannot use (a nil handler, a negative prefetch, a parameter of no
// Herald type), and E4020 for a second settlement of a message (ErrSettled); E4023
// says that a settlement's stream ended before its answer came. A code is itself an
// errors.Is target, so a caller branches without building an error:
//
//	if errors.Is(err, herald.CodeAckTimeout) { … } // the lease expired first
//	var he *herald.Error
//	if errors.As(err, &he) && he.Line > 0 { … } // points into the query text
//
// Failures below Herald's protocol (a refused connection, a broken stream, the
// caller's own context ending) pass through as the errors of the network and context
// packages; Status alone, made to ask about servers that may be down, wraps a server
// it cannot reach in E4025 UNREACHABLE, the network's error kept for errors.As.
//
// # Transport
//
// The client's one transport is the Connect protocol over HTTP/2 (cleartext h2c for
// http:// addresses, TLS with ALPN for https://): unary calls for queries, sessions and
// prepared statements; a publish stream carrying many messages per frame, each answered
// once durable; a subscribe stream carrying deliveries out and settlements in, with
// credit-based flow control; and watch streams. Dial checks the server's health and
// that the HTTP client speaks HTTP/2 (a client given with WithHTTPClient that speaks
// only HTTP/1.1 is refused with E4017, since the streams need HTTP/2). The client uses
// the server's HTTP/JSON API only where there is no RPC — the queue REST API, the
// principals and tokens (SetPrincipal, CreateToken, Tokens, RevokeToken) — and for
// ExecJSON, which returns a query's answer in its JSON form, as the server wrote it;
// these calls share the client's HTTP client, TLS settings, token and timeout. Delivery
// ids are accepted only when URL-safe.
package client
