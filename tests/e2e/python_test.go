package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// pythonWithGRPC returns a Python interpreter that can import grpc and protobuf — the
// one on PATH, or Debian's, where python3-grpcio installs — or "" when there is none.
func pythonWithGRPC() string {
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = exec.CommandContext(ctx, p, "-c", "import grpc, google.protobuf").Run()
		cancel()
		if err == nil {
			return p
		}
	}
	return ""
}

// pythonExampleOutput is what examples/python/herald_example.py prints.
var pythonExampleOutput = regexp.MustCompile(`^published 3 messages to python-example-[0-9a-f]{8}
consumed hello 0 \(n=0, attempt 1\)
consumed hello 1 \(n=1, attempt 1\)
consumed hello 2 \(n=2, attempt 1\)
acknowledged 3
acknowledging it again: NOT_FOUND E8004
messages left in the queue: 0
$`)

// TestPythonExample runs the Python example client (examples/python) against the real
// server: over gRPC it creates a queue, publishes, consumes and acknowledges. It skips,
// saying so, where Python's grpc package is not installed. Where protoc and gRPC's
// Python plugin are, it also checks that the committed stubs are what generate.sh makes
// from the current .proto.
func TestPythonExample(t *testing.T) {
	dir := docPath(t, "examples/python")
	t.Run("stubs", func(t *testing.T) {
		for _, tool := range []string{"protoc", "grpc_python_plugin"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("%s is not installed (Debian: protobuf-compiler, protobuf-compiler-grpc): the stubs are not regenerated", tool)
			}
		}
		out := t.TempDir()
		if b, err := exec.Command("sh", filepath.Join(dir, "generate.sh"), out).CombinedOutput(); err != nil {
			t.Fatalf("generate.sh: %v\n%s", err, b)
		}
		for _, name := range []string{"herald_pb2.py", "herald_pb2_grpc.py"} {
			fresh, err := os.ReadFile(filepath.Join(out, name))
			if err != nil {
				t.Fatal(err)
			}
			committed, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(fresh, committed) {
				t.Errorf("examples/python/%s is not what generate.sh makes from api/heraldv1/herald.proto: run examples/python/generate.sh", name)
			}
		}
	})
	t.Run("run", func(t *testing.T) {
		python := pythonWithGRPC()
		if python == "" {
			t.Skip("Python's grpc package is not installed (Debian: apt-get install python3-grpcio python3-protobuf): the Python example is not run")
		}
		s := startServer(t, t.TempDir())
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, python, "herald_example.py", s.Addr())
		cmd.Dir = dir
		// No bytecode files in the repository.
		cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !pythonExampleOutput.Match(out) {
			t.Fatalf("%s herald_example.py: %v\n%s", python, err, out)
		}
	})
}
