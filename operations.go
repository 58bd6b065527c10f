package herald

import (
	"sort"
	"strings"
)

// OperationGrant is what one operation of a surface — an RPC method, an HTTP route, a
// stream — requires of the principal a request acts for.
type OperationGrant struct {
	// Public operations are answered without credentials (the health checks).
	Public bool
	// Needs are grants the principal must hold before the operation runs at all:
	// "admin", or "action:Type".
	Needs []string
	// Then says what is checked while the operation runs, beyond Needs:
	//   - "statement": the grants the statement's reads and writes need (engine.AccessOf);
	//   - "delivery": the delivery id, a capability, and settle on its message's type;
	//   - "holder": the message is leased to this principal (or it has admin);
	//   - "lock": the lock id, a capability;
	//   - "owner": the session is the principal's own;
	//   - "": nothing more.
	Then string
}

// Operations is every operation of every surface and the grant it needs, in one
// table: an RPC method as its procedure ("/herald.v1.Queues/CreateQueue"), an HTTP
// route as its method and pattern ("POST /queue/{queue_id}/pop"). The surfaces check
// each request against its entry before their handler runs, and an operation without
// an entry is refused; a test walks the RPC services' descriptors and the HTTP router
// and fails on any operation missing here.
var Operations = map[string]OperationGrant{
	// The query and stream service.
	"/herald.v1.Herald/Query":   {Then: "statement"},
	"/herald.v1.Herald/Exec":    {Then: "statement"},
	"/herald.v1.Herald/Prepare": {Then: "statement"},
	// Prepared statements are a cache shared by content (the name is the text's hash):
	// dropping one costs its users a prepare again, which the client does by itself.
	"/herald.v1.Herald/Unprepare":    {},
	"/herald.v1.Herald/Publish":      {Then: "statement"},
	"/herald.v1.Herald/OpenSession":  {},
	"/herald.v1.Herald/CloseSession": {Then: "owner"},
	"/herald.v1.Herald/Consume":      {Then: "statement"},
	"/herald.v1.Herald/Subscribe":    {Then: "statement"},
	"/herald.v1.Herald/Watch":        {Then: "statement"},
	"/herald.v1.Herald/WatchMany":    {Then: "statement"},
	"/herald.v1.Herald/Ack":          {Then: "delivery"},
	"/herald.v1.Herald/Nack":         {Then: "delivery"},
	"/herald.v1.Herald/Extend":       {Then: "delivery"},
	"/herald.v1.Herald/Settle":       {Then: "delivery"},

	// The named queues (QueueMessage nodes, _Queue configuration).
	"/herald.v1.Queues/CreateQueue":        {Needs: []string{ActAdmin}},
	"/herald.v1.Queues/DeleteQueue":        {Needs: []string{ActAdmin}},
	"/herald.v1.Queues/RedriveDeadLetters": {Needs: []string{ActAdmin}},
	"/herald.v1.Queues/Enqueue":            {Needs: []string{"write:QueueMessage"}},
	"/herald.v1.Queues/ConsumeQueue":       {Needs: []string{"consume:QueueMessage", "settle:QueueMessage"}},
	"/herald.v1.Queues/Ack":                {Needs: []string{"settle:QueueMessage"}, Then: "holder"},
	"/herald.v1.Queues/Nack":               {Needs: []string{"settle:QueueMessage"}, Then: "holder"},
	"/herald.v1.Queues/Extend":             {Needs: []string{"settle:QueueMessage"}, Then: "holder"},

	// The standard gRPC services on the same port: the health checks answer without
	// credentials, like /healthz (a Kubernetes probe brings none); reflection describes
	// the services to any principal (grpcurl without -proto).
	"/grpc.health.v1.Health/Check":                                   {Public: true},
	"/grpc.health.v1.Health/Watch":                                   {Public: true},
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      {},
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": {},

	// JSON over HTTP.
	"POST /v1/query":           {Then: "statement"},
	"GET /v1/watch":            {Then: "statement"},
	"POST /v1/settle":          {Then: "delivery"},
	"POST /v1/sessions":        {},
	"DELETE /v1/sessions/{id}": {Then: "owner"},
	"GET /healthz":             {Public: true},
	"HEAD /healthz":            {Public: true},
	"GET /readyz":              {Public: true},
	"HEAD /readyz":             {Public: true},
	"GET /metrics":             {},
	"GET /v1/cluster":          {},
	// The Go runtime's profiles show the server's code and timing: administrators only.
	"GET /debug/pprof/":         {Needs: []string{ActAdmin}},
	"POST /debug/pprof/":        {Needs: []string{ActAdmin}}, // symbol look-ups
	"* /":                       {},                          // every other path: 404
	"PUT /v1/principals/{name}": {Needs: []string{ActAdmin}},
	"POST /v1/tokens":           {Needs: []string{ActAdmin}},
	"GET /v1/tokens":            {Needs: []string{ActAdmin}},
	"DELETE /v1/tokens/{id}":    {Needs: []string{ActAdmin}},

	// The console (/ui): its pages run their statements as the principal, which
	// decides what each shows and does; a principal without any grant is refused. The
	// sign-in form answers without credentials (it only sets the cookie the next
	// request is authenticated by).
	"GET /ui/{$}":           {Then: "statement"},
	"GET /ui/queues":        {Then: "statement"},
	"GET /ui/streams":       {Then: "statement"},
	"GET /ui/dead-letters":  {Then: "statement"},
	"POST /ui/dead-letters": {Then: "statement"},
	"GET /ui/query":         {},
	"POST /ui/query":        {Then: "statement"},
	"GET /ui/tail":          {},
	"GET /ui/tail/events":   {Then: "statement"},
	"GET /ui/stats":         {Then: "statement"},
	"GET /ui/static/":       {},
	"GET /ui/login":         {Public: true},
	"POST /ui/login":        {Public: true},
	"POST /ui/logout":       {},

	// The queue REST API (QueueItem nodes). A pop without require_ack settles at once,
	// and a pop with it is settled by acknowledge or release: popping needs both.
	"POST /queue/{queue_id}/push":        {Needs: []string{"write:QueueItem"}},
	"POST /queue/{queue_id}/pop":         {Needs: []string{"consume:QueueItem", "settle:QueueItem"}},
	"POST /queue/{queue_id}/acknowledge": {Needs: []string{"settle:QueueItem"}, Then: "lock"},
	"POST /queue/{queue_id}/release":     {Needs: []string{"settle:QueueItem"}, Then: "lock"},
}

// CheckOperation refuses p the operation op when op has no entry in Operations
// (E4013: a surface that forgot to declare it fails closed) or p lacks one of its Needs
// (E4013). A nil principal — a server without authentication — may do everything.
func CheckOperation(p *Principal, op string) error {
	g, ok := Operations[op]
	if !ok {
		return Errorf(CodePermissionDenied, "the operation %s declares no grant; it is refused", op)
	}
	if p == nil || g.Public {
		return nil
	}
	for _, need := range g.Needs {
		action, typ, _ := strings.Cut(need, ":")
		if err := p.Check(action, typ); err != nil {
			return err
		}
	}
	return nil
}

// OperationNames lists the operations of Operations, sorted.
func OperationNames() []string {
	out := make([]string, 0, len(Operations))
	for op := range Operations {
		out = append(out, op)
	}
	sort.Strings(out)
	return out
}
