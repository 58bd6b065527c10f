package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herald-mq/herald/internal/clock"
	"github.com/herald-mq/herald/store/memstore"
)

// TestConnectionLimit: past MaxConnections a new connection is closed at once; when
// one closes, there is room again.
func TestConnectionLimit(t *testing.T) {
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger(), MaxConnections: 2})
	start(t, s)
	get := func(c net.Conn) error {
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := get(c); err != nil {
			t.Fatalf("a connection within the limit: %v", err)
		}
		held = append(held, c)
	}
	extra, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := get(extra); err == nil {
		t.Fatal("a connection past the limit was served")
	}
	extra.Close()
	held[0].Close()
	deadline := time.Now().Add(10 * time.Second) // a bound on a hang
	for {
		c, err := net.Dial("tcp", s.Addr())
		if err == nil {
			err = get(c)
			c.Close()
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no room after a connection closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRateLimit: with Auth and RateLimit, a principal past its rate gets 429 E4015
// with Retry-After, and its bucket refills as the clock moves.
func TestRateLimit(t *testing.T) {
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger(), Auth: true, RateLimit: 2, Clock: clk})
	start(t, s)
	q := func() (int, http.Header, string) {
		resp, err := http.Post("http://"+s.Addr()+"/v1/query", "application/json", strings.NewReader(`{"query": "MATCH n: N RETURN n"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	for i := range 2 {
		if st, _, body := q(); st != 200 {
			t.Fatalf("request %d within the rate: %d %s", i+1, st, body)
		}
	}
	st, h, body := q()
	if st != 429 || !strings.Contains(body, "E4015") || h.Get("Retry-After") != "1" {
		t.Fatalf("past the rate: %d %v %s, want 429 E4015 with Retry-After 1", st, h, body)
	}
	clk.Advance(time.Second)
	if st, _, body := q(); st != 200 {
		t.Fatalf("after a second: %d %s", st, body)
	}
}

// TestSlowBodiesFreeTheirConnections: clients that send a request body a byte at a
// time hold every connection MaxConnections allows; past BodyTimeout their requests
// end with 408 E4016 and their connections close, so a new client — a health check —
// is served again while they are still trickling.
func TestSlowBodiesFreeTheirConnections(t *testing.T) {
	const conns = 4
	s := New(Config{Backend: memstore.New(), Listen: "127.0.0.1:0", Logger: quietLogger(), MaxConnections: conns, BodyTimeout: 300 * time.Millisecond})
	start(t, s)
	answers := make(chan string, conns)
	stop := make(chan struct{})
	defer close(stop)
	for range conns {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		go func() { // one byte every 100 ms: 20 s for the whole body
			for range 199 {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := io.WriteString(c, " "); err != nil {
					return
				}
			}
		}()
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				answers <- "no answer: " + err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			answers <- resp.Status + " " + string(b)
		}()
	}
	for range conns {
		if a := <-answers; !strings.HasPrefix(a, "408") || !strings.Contains(a, "E4016") {
			t.Fatalf("a trickled body: %s, want 408 E4016", a)
		}
	}
	deadline := time.Now().Add(10 * time.Second) // a bound on a hang; the tricklers go on for 20 s
	for {
		resp, err := http.Get("http://" + s.Addr() + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection for a health check while slow bodies trickle: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
