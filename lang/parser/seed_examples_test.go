package parser_test

// seedExamples holds every example statement of the design seeds for WATCH and for
// ACK/NACK, as written there (comments included), the Layer 0 constraint declarations
// included. Event payloads shown in those documents are not statements of the language
// and are left out.
var seedExamples = []string{
	// ACK / NACK.
	`-- Acknowledge successful processing
ACK "delivery_abc123"

-- Acknowledge using variable
ACK $deliveryId

-- Reject and request redelivery
NACK "delivery_abc123"

-- Reject without redelivery (move to dead letter)
NACK "delivery_abc123" [no_retry]`,
	`-- After successful processing:
ACK "abc123"`,
	`NACK "abc123"`,
	`NACK "abc123" [no_retry]`,
	`WATCH j: Job WHERE j.status = "pending"
  [mode: consume]
  [ack_timeout: 30s]
  RETURN j`,
	`WATCH j: Job WHERE j.status = "pending"
  [mode: consume]
  [max_redeliveries: 3]
  [dead_letter: #dlq_node]
  RETURN j`,
	`node _WatchEvent [sealed] {
  event_type: String [required],     -- "initial" | "added" | "removed" | "changed" | "consumed"
  tick: Int [required],
  delivery_id: String?,              -- present for consume mode; used with ACK/NACK
  created_at: Timestamp [required]
}`,
	`node _DeadLetter [sealed] {
  original_match: String [required], -- serialized match data
  failure_reason: String [required], -- "no_retry" | "max_redeliveries_exceeded"
  delivery_attempts: Int [required], -- total attempts before dead letter
  created_at: Timestamp [required]
}`,
	`edge _watch_dead_letter(watch: _Watch, letter: _DeadLetter) {}`,
	`-- Worker consumes jobs
WATCH j: Job WHERE j.status = "pending"
  [mode: consume]
  [ack_timeout: 30s]
  [max_redeliveries: 3]
  [dead_letter: #failed_jobs]
  RETURN j

-- Process successfully:
ACK "d123"

-- Or on failure, request retry:
NACK "d123"

-- Or on permanent failure:
NACK "d123" [no_retry]`,
	`-- On success:
ACK "d123"

-- On transient/retryable failure:
NACK "d123"

-- On permanent/unrecoverable failure:
NACK "d123" [no_retry]`,
	`-- Multiple workers in same group
WATCH j: Job WHERE j.status = "pending"
  [mode: consume]
  [group: "workers"]
  [ack_timeout: 60s]
  RETURN j

ACK "d_a1"
NACK "d_b1"  -- job_2 redelivered to A or B`,

	// WATCH.
	`-- Simple watch for completed tasks
WATCH t: Task WHERE t.status = "done"
RETURN t

-- Consume mode with consumer group
WATCH j: Job [mode: consume, group: "workers"]
RETURN j

-- Watch with attribute ordering (priority queue)
WATCH t: Task [ordering: attribute(t.priority DESC)]
RETURN t

-- Watch with windowed aggregation
WATCH t: Task [window: tumbling(10s)]
RETURN COUNT(t)

-- Full options example
WATCH m: Message, inbox(#self, m)
  [mode: consume, group: "processors", ordering: attribute(m.sent_at ASC),
   delivery: reliable, ack_timeout: 30s, max_redeliveries: 3]
RETURN m.content, m.sent_at`,
	`ACK #delivery_id`,
	`NACK #delivery_id`,
	`NACK #delivery_id [no_retry]`,
	`node _Watch [sealed] {
  pattern: String [required],        -- serialized pattern
  mode: String [required],           -- "watch" | "consume"
  group: String?,                    -- group name for competing consumers
  status: String [required],         -- "active" | "paused" | "cancelled"
  ordering: String = "arrival",      -- ordering mode
  delivery: String = "best_effort",  -- delivery guarantee
  visibility: String = "committed",  -- visibility mode
  buffer_size: Int = 1000,           -- max buffered events
  on_full: String = "drop",          -- "drop" | "block" | "error"
  created_at: Timestamp [required],
  events_delivered: Int = 0,         -- counter
  events_pending: Int = 0,           -- current buffer size
  last_event_at: Timestamp?,
  doc: String?
}

node _WatchEvent [sealed] {
  event_type: String [required],     -- "initial" | "added" | "removed" | "changed" | "consumed"
  tick: Int [required],
  delivery_id: String?,              -- for consume mode
  created_at: Timestamp [required]
}

node _DeadLetter [sealed] {
  original_match: String [required], -- serialized match data
  failure_reason: String [required],
  delivery_attempts: Int [required],
  created_at: Timestamp [required]
}`,
	`edge _session_has_watch(session: _Session, watch: _Watch) {}

edge _watch_event(watch: _Watch, event: _WatchEvent) {
  position: Int [required]           -- ordering within watch
}

edge _watch_dead_letter(watch: _Watch, letter: _DeadLetter) {}

edge _ontology_declares_watch(ontology: _Ontology, watch: _Watch) {}`,
	`constraint _watch_has_pattern:
  w: _Watch => w.pattern != null AND length(w.pattern) > 0

constraint _watch_valid_mode:
  w: _Watch => w.mode = "watch" OR w.mode = "consume"

constraint _watch_valid_status:
  w: _Watch => w.status = "active" OR w.status = "paused" OR w.status = "cancelled"

constraint _watch_valid_on_full:
  w: _Watch => w.on_full = "drop" OR w.on_full = "block" OR w.on_full = "error"`,
	`-- Watch all tasks in a project for dashboard
WATCH t: Task, belongs_to(t, #project_1)
  [mode: watch, delivery: reliable]
RETURN t.id, t.title, t.status, t.priority`,
	`-- Worker 1
WATCH j: Job WHERE j.status = "pending"
  [mode: consume, group: "workers", ordering: attribute(j.priority DESC, j.created_at ASC)]
RETURN j

-- Worker 2 (same group - jobs distributed between workers)
WATCH j: Job WHERE j.status = "pending"
  [mode: consume, group: "workers", ordering: attribute(j.priority DESC, j.created_at ASC)]
RETURN j

-- Process and acknowledge
ACK #delivery_abc123`,
	`-- Schema
node Message { content: String, sent_at: Timestamp }
edge inbox(recipient: Actor, message: Message)

-- Send
SPAWN m: Message { content = "hello", sent_at = now() }
LINK inbox(#bob, m)

-- Receive (Bob's watch)
WATCH m: Message, inbox(#self, m)
  [mode: consume, ordering: attribute(m.sent_at ASC)]
RETURN m.content, m.sent_at`,
	`-- Aggregate task stats every 10 seconds
WATCH t: Task, belongs_to(t, #project_1)
  [window: tumbling(10s)]
RETURN COUNT(t) AS total,
       COUNT(t WHERE t.status = "done") AS done,
       AVG(t.priority) AS avg_priority`,
	`-- Create watch and store handle
w = WATCH t: Task WHERE t.status = "done"
      [mode: watch]
    RETURN t

-- Pause watch
PAUSE WATCH #w

-- Resume watch
RESUME WATCH #w

-- Modify options
ALTER WATCH #w SET [buffer: 2000]

-- Cancel watch
CANCEL WATCH #w`,
}
