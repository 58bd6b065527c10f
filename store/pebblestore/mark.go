package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/vfs"
)

// The position mark: a small file beside the database that records a position the
// store had made durable. Pebble replays its write-ahead log up to the first damaged
// record and stops there without an error, so a log that lost a synced tail (a damaged
// disk, a bad restore) would open with its position moved back and acknowledged commits
// gone. Open compares the recovered position with the mark and refuses a store that
// is behind it, unless Options.AcceptLoss says to open it anyway.
//
// The mark is rewritten (write, sync, rename, sync the directory) at most once per
// Options.MarkInterval, after a sync, by the committer that finds it due, and at Close.
// It lags the durable position by up to that interval, so a loss of the last moment's
// commits may go unseen; a loss larger than that is caught.

const markFile = "HERALD-POSITION"

// DefaultMarkInterval is Options.MarkInterval's default.
const DefaultMarkInterval = time.Second

// ErrLostTail is the error Open returns when the store is behind its position mark.
var ErrLostTail = errors.New("pebblestore: the write-ahead log lost synced commits")

// marker writes the position mark.
type marker struct {
	fs       vfs.FS
	dir      string
	now      func() time.Time
	interval time.Duration

	mu      sync.Mutex // held while writing; a committer that finds it held skips
	last    time.Time
	written uint64
}

// readMark returns the mark's position; ok is false when there is no mark.
func readMark(fs vfs.FS, dir string) (seq uint64, ok bool, err error) {
	f, err := fs.Open(fs.PathJoin(dir, markFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, false, nil
		}
		return 0, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, false, err
	}
	seq, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("pebblestore: unreadable position mark %q: %w", b, err)
	}
	return seq, true, nil
}

// maybe writes the mark for seq, a durable position, when the last write is older
// than the interval and no other committer is writing it.
func (m *marker) maybe(seq uint64) {
	if !m.mu.TryLock() {
		return
	}
	defer m.mu.Unlock()
	if seq <= m.written || m.now().Sub(m.last) < m.interval {
		return
	}
	_ = m.writeLocked(seq) // a failed mark costs only its protection; the next one retries
}

// write writes the mark for seq now.
func (m *marker) write(seq uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writeLocked(seq)
}

func (m *marker) writeLocked(seq uint64) error {
	tmp := m.fs.PathJoin(m.dir, markFile+".tmp")
	f, err := m.fs.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte(strconv.FormatUint(seq, 10) + "\n")); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := m.fs.Rename(tmp, m.fs.PathJoin(m.dir, markFile)); err != nil {
		return err
	}
	d, err := m.fs.OpenDir(m.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return err
	}
	m.last, m.written = m.now(), seq
	return nil
}
