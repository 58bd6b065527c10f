package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/herald-mq/herald"
)

// The position mark: a small file beside the database that records a position the
// store had made durable. Pebble replays its write-ahead log up to the first damaged
// record and stops there without an error, so a log that lost a synced tail (a damaged
// disk, a bad restore) would open with its position moved back and acknowledged commits
// gone. Open compares the recovered position with the mark and refuses a store that
// is behind it, unless Options.AcceptLoss says to open it anyway.
//
// The mark is rewritten (write, sync, rename, sync the directory) at most once per
// Options.MarkInterval, after a sync, by the committer that finds it due; when commits
// pause before it is due, the marker's goroutine writes it once the interval is up, so
// an idle store's mark is its durable position. It is written at Close too. It lags the
// durable position by at most the interval, so only a loss of the last moment's
// commits may go unseen.
//
// The store records in its own data that it has a mark (keyMarked, written with the
// first one), so a mark that goes missing — deleted, or lost with a restore — is
// refused like a lost tail rather than taken for a new store's.

const markFile = "HERALD-POSITION"

// DefaultMarkInterval is Options.MarkInterval's default.
const DefaultMarkInterval = time.Second

// ErrLostTail is the error Open returns when the store is behind its position mark, or
// its mark is missing.
var ErrLostTail = errors.New("pebblestore: the write-ahead log lost synced commits")

// marker writes the position mark.
type marker struct {
	fs       vfs.FS
	dir      string
	clock    herald.Clock
	interval time.Duration

	mu      sync.Mutex // held while writing; a committer that finds it held skips
	last    time.Time
	written uint64

	latest atomic.Uint64 // the newest durable position told to maybe
	due    chan struct{} // maybe skipped a write: the loop writes it when the interval is up
	quit   chan struct{}
	done   chan struct{}
}

func newMarker(fs vfs.FS, dir string, clk herald.Clock, interval time.Duration) *marker {
	return &marker{fs: fs, dir: dir, clock: clk, interval: interval, due: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

// start runs the catch-up loop; stop ends it and waits for it.
func (m *marker) start() { go m.loop() }

func (m *marker) stop() {
	close(m.quit)
	<-m.done
}

// loop writes the mark a committer skipped, once the interval since the last write is
// up, unless a committer has written it meanwhile.
func (m *marker) loop() {
	defer close(m.done)
	for {
		select {
		case <-m.quit:
			return
		case <-m.due:
		}
		m.mu.Lock()
		wait := m.interval - m.clock.Now().Sub(m.last)
		m.mu.Unlock()
		if wait > 0 {
			t := m.clock.NewTimer(wait)
			select {
			case <-m.quit:
				t.Stop()
				return
			case <-t.C():
			}
		}
		m.mu.Lock()
		if seq := m.latest.Load(); seq > m.written {
			_ = m.writeLocked(seq) // a failed mark costs only its protection; the next one retries
		}
		m.mu.Unlock()
	}
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
// than the interval and no other committer is writing it; otherwise the loop writes it
// when the interval is up.
func (m *marker) maybe(seq uint64) {
	for {
		old := m.latest.Load()
		if seq <= old || m.latest.CompareAndSwap(old, seq) {
			break
		}
	}
	if m.mu.TryLock() {
		wrote := seq <= m.written
		if !wrote && m.clock.Now().Sub(m.last) >= m.interval {
			wrote = m.writeLocked(seq) == nil
		}
		m.mu.Unlock()
		if wrote {
			return
		}
	}
	select {
	case m.due <- struct{}{}:
	default:
	}
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
	m.last, m.written = m.clock.Now(), seq
	return nil
}
