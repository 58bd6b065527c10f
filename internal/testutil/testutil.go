// Package testutil holds helpers for tests that run the real herald binary: building it,
// starting "herald serve" on a free port, and stopping it gently or with SIGKILL.
// It depends only on the standard library so any test may use it.
package testutil

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// GoTool returns the go command: the one on PATH, else the one of the running toolchain.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// BuildBinary builds the main package pkg (e.g. "./cmd/herald") of the module rooted at
// moduleDir into dir and returns the binary's path.
func BuildBinary(ctx context.Context, moduleDir, pkg, dir string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, GoTool(), "build", "-o", out, pkg)
	cmd.Dir = moduleDir
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}

// Server is a running "herald serve" process.
type Server struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result

	mu  sync.Mutex
	log bytes.Buffer
}

// StartServer runs bin serve with --listen 127.0.0.1:0, --data dataDir and JSON logs
// (plus extra flags), and waits up to timeout for the "listening" log record that
// names the bound address.
func StartServer(bin, dataDir string, timeout time.Duration, extra ...string) (*Server, error) {
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data", dataDir, "--log-format", "json"}, extra...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go s.readLog(stderr, found)
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	select {
	case addr := <-found:
		s.addr = addr
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("herald serve exited before listening: %v\n%s", s.err, s.Log())
	case <-time.After(timeout):
		s.Kill()
		return nil, fmt.Errorf("herald serve did not report its address within %v\n%s", timeout, s.Log())
	}
}

// readLog copies the process's log and reports the address of the "listening" record.
func (s *Server) readLog(r io.Reader, found chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		s.mu.Lock()
		s.log.Write(line)
		s.log.WriteByte('\n')
		s.mu.Unlock()
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" && rec.Addr != "" {
			select {
			case found <- rec.Addr:
			default:
			}
		}
	}
}

// Addr returns the bound host:port.
func (s *Server) Addr() string { return s.addr }

// URL returns the base URL of the HTTP API.
func (s *Server) URL() string { return "http://" + s.addr }

// Log returns what the process has logged so far.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// Kill sends SIGKILL and waits for the process to be gone.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Terminate sends SIGTERM and waits up to timeout for the process to exit; it returns
// the exit code, or an error when the process had to be killed.
func (s *Server) Terminate(timeout time.Duration) (int, error) {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return -1, err
	}
	select {
	case <-s.done:
	case <-time.After(timeout):
		s.Kill()
		return -1, fmt.Errorf("herald serve did not exit within %v of SIGTERM", timeout)
	}
	var ee *exec.ExitError
	if errors.As(s.err, &ee) {
		return ee.ExitCode(), nil
	}
	if s.err != nil {
		return -1, s.err
	}
	return 0, nil
}

// Signal sends sig to the process.
func (s *Server) Signal(sig os.Signal) error { return s.cmd.Process.Signal(sig) }

// Exited reports whether the process has exited.
func (s *Server) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// ModuleRoot walks up from dir to the folder holding go.mod.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir || strings.TrimSpace(parent) == "" {
			return "", errors.New("no go.mod above " + dir)
		}
		dir = parent
	}
}
