package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDiskFull runs the server on a small tmpfs with a free-space reserve: when the
// disk runs low, writes are refused at once with 507 E5005 (no hang), reads are
// answered, /readyz says not ready and one ERROR line says why; once the tmpfs grows,
// writes resume without a restart, and every acknowledged write is there.
func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if out, err := exec.Command("mkdir", "-p", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mkdir: %v %s", err, out)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=400m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (it needs root): %v %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })

	s := startServer(t, filepath.Join(mnt, "data"), "--min-free-space", "300000000")
	u := s.URL()
	mustQuery(t, u, `node Blob { body: String }`)
	chunk := make([]byte, 384<<10)
	acked := 0
	var refused *response
	for i := 0; i < 1000 && refused == nil; i++ {
		_, _ = rand.Read(chunk)
		r, err := query(u, `SPAWN b: Blob { body = $b }`, map[string]any{"b": base64.StdEncoding.EncodeToString(chunk)})
		switch {
		case err != nil:
			t.Fatalf("write %d: %v", i, err)
		case r.Status == 200:
			acked++
		case r.Status == 507 && r.Error != nil && r.Error.Code == "E5005":
			refused = r
		default:
			t.Fatalf("write %d: status %d %+v", i, r.Status, r.Error)
		}
	}
	if refused == nil || acked == 0 {
		t.Fatalf("after %d writes the disk never filled", acked)
	}
	// Refused fast, reads answered, not ready.
	if r, err := query(u, `SPAWN b: Blob { body = "x" }`, nil); err != nil || r.Status != 507 {
		t.Fatalf("a write while full: %v %+v", err, r)
	}
	if r := mustQuery(t, u, `MATCH b: Blob RETURN COUNT(b)`); rowsJSON(r, 0) != "[["+strconv.Itoa(acked)+"]]" {
		t.Fatalf("a read while full: %s, want %d", rowsJSON(r, 0), acked)
	}
	resp, err := http.Get(u + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == 200 || !strings.Contains(string(body), "E5005") {
		t.Fatalf("/readyz while full: %d %s, want not ready with E5005", resp.StatusCode, body)
	}

	// Space returns: writes resume by themselves.
	if out, err := exec.Command("mount", "-o", "remount,size=1200m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v %s", err, out)
	}
	eventually(t, "writes resume", func() bool {
		r, err := query(u, `SPAWN b: Blob { body = "after" }`, nil)
		return err == nil && r.Status == 200
	})
	if resp, err := http.Get(u + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/readyz after space returned: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if r := mustQuery(t, u, `MATCH b: Blob RETURN COUNT(b)`); rowsJSON(r, 0) != "[["+strconv.Itoa(acked+1)+"]]" {
		t.Fatalf("after recovery: %s, want %d", rowsJSON(r, 0), acked+1)
	}
	time.Sleep(50 * time.Millisecond) // let the log line of the recovery arrive
	if n := strings.Count(s.Log(), "below its free-space reserve"); n != 1 {
		t.Fatalf("%d log lines about the reserve, want one per state change", n)
	}
}
