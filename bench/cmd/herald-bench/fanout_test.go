package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// The fan-out mode reads the server's gauges while it measures the server's memory: it
// asks for an uncompressed answer, so that the server holds no compressor for it.
func TestGaugeAsksForAnUncompressedAnswer(t *testing.T) {
	var enc []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		enc = append(enc, r.Header.Get("Accept-Encoding"))
		_, _ = w.Write([]byte("# HELP x\nherald_watch_streams_parked 3\n"))
	}))
	defer srv.Close()
	v, err := gauge(t.Context(), srv.URL, "herald_watch_streams_parked")
	if err != nil || v != 3 {
		t.Fatalf("gauge = %v, %v; want 3", v, err)
	}
	if len(enc) != 1 || enc[0] != "identity" {
		t.Fatalf("Accept-Encoding %q; want identity", enc)
	}
}
