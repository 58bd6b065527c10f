package lint

// Third-party modules named by the rules.
const (
	modPebble     = "github.com/cockroachdb/pebble"
	modConnect    = "connectrpc.com/connect"
	modProtobuf   = "google.golang.org/protobuf"
	modCobra      = "github.com/spf13/cobra"
	modReadline   = "github.com/chzyer/readline"
	modPrometheus = "github.com/prometheus/client_golang"
	modRapid      = "pgregory.net/rapid"
	modDataDriven = "github.com/cockroachdb/datadriven"
	modPebbleVFS  = "github.com/cockroachdb/pebble/vfs"
	modNATS       = "github.com/nats-io/nats.go"
	modAMQP       = "github.com/rabbitmq/amqp091-go"
	modRedis      = "github.com/redis/go-redis/v9"
	modBTree      = "github.com/google/btree"
	modGoleak     = "go.uber.org/goleak"
	modPgx        = "github.com/jackc/pgx/v5"
	modReflect    = "connectrpc.com/grpcreflect"
	modHealth     = "connectrpc.com/grpchealth"
	modTOML       = "github.com/BurntSushi/toml"
	modPflag      = "github.com/spf13/pflag"
	modOTel       = "go.opentelemetry.io/otel"
	modOTelTrace  = "go.opentelemetry.io/otel/trace"
	modOTelSDK    = "go.opentelemetry.io/otel/sdk"
	modChromedp   = "github.com/chromedp"
)

// lang lets the language packages' tests use each other (the parser's round-trip test
// prints, the printer's golden test parses).
var lang = []string{"lang/..."}

// Herald is the rule set of this module. docs/ARCHITECTURE.md shows the same table; keep
// them in step.
var Herald = Config{
	Module: "github.com/herald-mq/herald",
	Rules: []Rule{
		{Pkg: "."},
		{Pkg: "lang/token", TestAllow: lang},
		{Pkg: "lang/scanner", Allow: []string{"lang/token"}, TestAllow: lang},
		{Pkg: "lang/ast", Allow: []string{"lang/token"}, TestAllow: lang},
		// The one table of WATCH options (lang/option) gives the parser each value's shape.
		{Pkg: "lang/option", Allow: []string{"lang/token", "lang/ast"}, TestAllow: lang},
		{Pkg: "lang/parser", Allow: []string{"lang/token", "lang/scanner", "lang/ast", "lang/option"}, TestAllow: lang},
		{Pkg: "lang/printer", Allow: []string{"lang/token", "lang/ast"}, TestAllow: lang},
		{Pkg: "lang/eval", Allow: []string{".", "lang/token", "lang/ast"}, TestAllow: lang},
		{Pkg: "graph/...", Allow: []string{".", "lang/..."}, External: []string{modBTree}},
		{Pkg: "store", Allow: []string{"."}},
		{Pkg: "store/storetest", Allow: []string{".", "store"}, External: []string{modRapid}},
		{Pkg: "store/memstore", Allow: []string{".", "store"}},
		{Pkg: "store/pebblestore", Allow: []string{".", "store", "internal/clock"}, External: []string{modPebble}},
		{Pkg: "store/pgstore", Allow: []string{".", "store", "internal/clock"}, External: []string{modPgx}},
		// The engine's restart tests run Pebble on its in-memory filesystem.
		{Pkg: "engine/...", Allow: []string{".", "graph/...", "store", "lang/...", "internal/clock", "internal/id"}, TestAllow: []string{"store/..."}, TestExternal: []string{modPebbleVFS, modGoleak}},
		// Watch-mode and consume-mode tests restart the engine on Pebble's in-memory
		// filesystem, like the engine's, and check that no goroutine outlives them.
		// The standing query, once for both modes, between the engine and the modes.
		{Pkg: "standing", Allow: []string{".", "engine", "graph/...", "lang/..."}, TestAllow: []string{"store/...", "internal/clock"}},
		{Pkg: "watch/...", Allow: []string{".", "engine", "standing", "graph/...", "store", "lang/...", "internal/clock", "internal/id"}, TestAllow: []string{"store/..."}, TestExternal: []string{modPebbleVFS, modGoleak}},
		// Consume watches are managed (PAUSE, ALTER …) through the watch service's
		// statements, so the consume tests run one.
		{Pkg: "delivery/...", Allow: []string{".", "engine", "standing", "graph/...", "store", "lang/...", "internal/clock", "internal/id", "internal/indexheap"}, TestAllow: []string{"store/...", "watch"}, TestExternal: []string{modPebbleVFS, modGoleak}},
		// Principals and tokens are system nodes, read and written through the engine.
		{Pkg: "auth", Allow: []string{".", "engine", "graph"}, TestAllow: []string{"store/...", "internal/clock"}},
		// The seam every surface reaches a node through: an interface and the values that
		// cross it, and one fake of it for the surfaces' tests.
		{Pkg: "broker", Allow: []string{"."}},
		{Pkg: "broker/brokertest", Allow: []string{".", "broker"}},
		// The queue contracts translate onto the engine and the consume engine, and build
		// their statements as trees for the printer.
		{Pkg: "lockqueue", Allow: []string{".", "broker", "engine", "delivery", "graph/...", "lang/...", "internal/keyed", "internal/clock"}, TestAllow: []string{"store/..."}, TestExternal: []string{modGoleak}},
		{Pkg: "namedqueue", Allow: []string{".", "broker", "engine", "delivery", "graph/...", "lang/...", "internal/keyed", "internal/clock"}, TestAllow: []string{"store/..."}, TestExternal: []string{modGoleak}},
		{Pkg: "internal/keyed"},
		// The surfaces know the seam only: never the engine, the standing queries or the
		// queues behind it.
		{Pkg: "httpapi", Allow: []string{".", "broker", "internal/clock", "internal/indexheap"}, External: []string{modPrometheus}, TestAllow: []string{"broker/brokertest"}, TestExternal: []string{modGoleak}},
		// The server takes a tracer provider (OpenTelemetry's trace API) for rpcapi.
		{Pkg: "server", Allow: []string{".", "broker", "engine", "standing", "lang/parser", "watch", "delivery", "lockqueue", "namedqueue", "auth", "store", "store/pebblestore", "store/pgstore", "store/memstore", "httpapi", "rpcapi", "console", "internal/clock"}, External: []string{modOTelTrace}, TestAllow: []string{"graph", "internal/testutil", "client", "api/heraldv1"}, TestExternal: []string{modGoleak, modOTelSDK}},
		// The console is a surface like the others: the seam and the root package. Its
		// browser test drives Debian's chromium (chromedp, tests only) against a real
		// server started in-process, whose principals it makes through the client.
		{Pkg: "console", Allow: []string{".", "broker", "internal/clock"}, TestAllow: []string{"broker/brokertest", "server", "client"}, TestExternal: []string{modChromedp}},
		// The generated Connect package refers to the message package beside it.
		{Pkg: "api/...", Allow: []string{"api/..."}, External: []string{modProtobuf, modConnect}},
		{Pkg: "api/convert", Allow: []string{".", "api/heraldv1"}, External: []string{modProtobuf}},
		// rpcapi serves both RPC services on the seam, with gRPC server reflection and
		// health beside them; its queue tests put the real named queues behind the fake.
		// Its Publish and Subscribe streams record the spans of traced messages through
		// internal/tracing.
		{Pkg: "rpcapi", Allow: []string{".", "broker", "api/...", "internal/tracing"}, External: []string{modProtobuf, modConnect, modReflect, modHealth, modOTelTrace},
			TestAllow: []string{"broker/brokertest", "engine", "delivery", "namedqueue", "store/..."}, TestExternal: []string{modGoleak, modOTelSDK}},
		// The client's tests check that no goroutine outlives them. It shares the seam's
		// values (broker imports only the root package), builds the WATCH statement of a
		// ConsumerConfig as a tree for the language's printer (lang/... is standard
		// library only), and reads time from the real clock unless given another.
		// Its spans are made by internal/tracing; it names OpenTelemetry's trace API
		// only for WithTracerProvider and the spans it keeps, and its tests record
		// spans with the SDK.
		{Pkg: "client", Allow: []string{".", "broker", "api/...", "lang/...", "internal/clock", "internal/tracing"}, External: []string{modProtobuf, modConnect, modOTelTrace}, TestAllow: []string{"heraldtest"}, TestExternal: []string{modGoleak, modOTelSDK}},
		// The test kit's wait-until helpers build their watch statements as trees too.
		// It passes a tracer provider (OpenTelemetry's trace API) to the server and client.
		{Pkg: "heraldtest", Allow: []string{".", "server", "client", "store/memstore", "internal/clock", "lang/..."}, External: []string{modOTelTrace}, TestExternal: []string{modGoleak, modOTelSDK}},
		// The examples are programs a user could write: the client only, and the test kit
		// in their tests.
		{Pkg: "examples/...", Allow: []string{".", "client"}, TestAllow: []string{"heraldtest"}},
		{Pkg: "cmd/...", Allow: []string{"internal/cli"}},
		// Every command but serve is a client of the server through the Go client; the
		// statement of watch and consume is read with the language's front end. serve
		// reads its settings from flags (cobra's pflag), the environment and a TOML file. Its watch
		// tests serve the real RPC service over a scripted node, and its query tests a
		// fake that answers sessions in the RPC's messages.
		{Pkg: "internal/cli", Allow: []string{".", "server", "client", "lang/...", "internal/tracing"}, TestAllow: []string{"heraldtest", "rpcapi", "broker", "broker/brokertest", "api/heraldv1"}, External: []string{modCobra, modPflag, modReadline, modTOML}, TestExternal: []string{modProtobuf}},
		{Pkg: "internal/clock", Allow: []string{".", "internal/indexheap"}},
		{Pkg: "internal/indexheap"},
		{Pkg: "internal/id"},
		{Pkg: "internal/testutil", Allow: []string{"."}},
		{Pkg: "internal/race"},
		{Pkg: "internal/lint"},
		// OpenTelemetry lives here: the spans of a message's life and the trace context
		// it carries (docs/tracing.md). Its tests record spans with the SDK.
		// Its exporter (OTLP over HTTP, JSON) runs on the SDK's batching provider.
		{Pkg: "internal/tracing", Allow: []string{"."}, External: []string{modOTel}},
		// End-to-end tests drive the real binary over HTTP, some of them through the Go client.
		{Pkg: "tests/...", Allow: []string{".", "internal/testutil", "client"}},
		// The benchmark is a module of its own (bench/go.mod), so the peers' clients stay
		// out of the herald binary; its command runs `herald serve` as a child process (its
		// own copy of the command line, internal/cli, unless given a binary), or a
		// server in-process for profiling.
		{Pkg: "bench/...", Allow: []string{".", "client", "heraldtest", "internal/testutil", "bench", "bench/benchtest"}},
		{Pkg: "bench/cmd/...", Allow: []string{".", "client", "server", "internal/cli", "store/pgstore", "bench", "bench/herald", "bench/nats", "bench/rabbit", "bench/redis"}, External: []string{modCobra}},
		// Each peer's client module lives in its own benchmark adapter.
		{Pkg: "bench/nats", Allow: []string{"bench"}, External: []string{modNATS}, TestAllow: []string{"bench/benchtest"}},
		{Pkg: "bench/rabbit", Allow: []string{"bench"}, External: []string{modAMQP}, TestAllow: []string{"bench/benchtest"}},
		{Pkg: "bench/redis", Allow: []string{"bench"}, External: []string{modRedis}, TestAllow: []string{"bench/benchtest"}},
		// The worker example written against NATS JetStream, for the comparison in
		// docs/worker.md.
		{Pkg: "bench/examples/...", External: []string{modNATS}},
	},
	Exclusive: []Exclusive{
		{Module: modPebble, Only: []string{"store/pebblestore"}},
		{Module: modPgx, Only: []string{"store/pgstore"}},
		{Module: "connectrpc.com", Only: []string{"api/...", "rpcapi", "client"}},
		{Module: modReflect, Only: []string{"rpcapi"}},
		{Module: modHealth, Only: []string{"rpcapi"}},
		{Module: modCobra, Only: []string{"internal/cli", "bench/cmd/..."}},
		{Module: modReadline, Only: []string{"internal/cli"}},
		{Module: modTOML, Only: []string{"internal/cli"}},
		{Module: modPrometheus, Only: []string{"httpapi"}},
		{Module: modNATS, Only: []string{"bench/nats", "bench/examples/..."}},
		{Module: modAMQP, Only: []string{"bench/rabbit"}},
		{Module: modRedis, Only: []string{"bench/redis"}},
		{Module: modBTree, Only: []string{"graph/..."}},
		{Module: modOTel, Only: []string{"internal/tracing", "client", "rpcapi", "server", "heraldtest"}},
		{Module: modOTelSDK, Only: []string{"internal/tracing"}},
		{Module: modChromedp, Only: []string{"console"}},
	},
	TestKits:     []string{"internal/testutil", "internal/clock", "internal/race", "store/memstore", "store/storetest"},
	TestExternal: []string{modRapid, modDataDriven},
	Nested:       []string{"bench"},
}
