package pebblestore

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
)

// A sync of a write-ahead log file that grows must also commit the file's new length to
// the filesystem's journal; a sync of a file whose blocks are already written commits
// only the data. Pebble reuses retired log files, which are as long as what they held,
// but a new store starts its memtables at 256 KB and doubles them up to memTableSize,
// so its first logs are new files, grown write by write, and once retired they are
// reused short and grown again. Measured on the benchmark machine, that costs the first
// half gigabyte or so of a store's life about a quarter of its sync rate, and makes
// its rare stalls longer.
//
// When a store is created with Options.PreparedLogs, Open writes that many files of
// zeros (PreparedLogSize bytes, memTableSize by default) first, and the filesystem
// Pebble is given (logFS) hands them out as Pebble creates its logs. Pebble reads zeros after a log's records as the log's end
// (the state of a preallocated file), and its logs are written in the recyclable
// format, whose records name their log, so a reused file's old records are never read
// as new ones.

// spareSuffix names the prepared files; pebble ignores names it does not know.
const spareSuffix = ".spare-log"

// logFS is the filesystem of a store with prepared log files: Create of a log takes a
// prepared file while any is left.
type logFS struct {
	vfs.FS
	mu     sync.Mutex
	spares []string
}

func (f *logFS) Create(name string) (vfs.File, error) {
	if strings.HasSuffix(name, ".log") {
		if spare := f.take(); spare != "" {
			// Reused as Pebble reuses a retired log: renamed, then opened for writing
			// from its start, its length kept.
			return f.FS.ReuseForWrite(spare, name)
		}
	}
	return f.FS.Create(name)
}

func (f *logFS) take() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.spares) == 0 {
		return ""
	}
	s := f.spares[0]
	f.spares = f.spares[1:]
	return s
}

// prepareLogs removes the prepared files an earlier Open left unused and, when the
// store is new and opts asks for prepared logs, writes them and gives Pebble the
// filesystem that hands them out. A failure to write them (a full disk, say) is
// logged and the store opens without them; only a failure to remove files is returned.
func prepareLogs(po *pebble.Options, dir string, opts Options, logger *slog.Logger) error {
	names, err := po.FS.List(dir)
	if err != nil {
		return err
	}
	fresh := true
	for _, name := range names {
		fresh = fresh && (strings.HasSuffix(name, spareSuffix) || name == lockFile)
	}
	if err := removeSpareLogs(po.FS, dir); err != nil {
		return err
	}
	if !fresh || opts.PreparedLogs <= 0 {
		return nil
	}
	size := opts.PreparedLogSize
	if size <= 0 {
		size = memTableSize
	}
	lf, err := prepareLogFiles(po.FS, dir, opts.PreparedLogs, size)
	if err != nil {
		logger.Warn("the new store's log files could not be written ahead; its first logs grow as they are written", "err", err)
		return removeSpareLogs(po.FS, dir)
	}
	po.FS = lf
	return nil
}

// prepareLogFiles writes n files of size zeros in dir, each synced, and the directory
// after them, and returns a filesystem that hands them out as Pebble creates its logs.
func prepareLogFiles(fsys vfs.FS, dir string, n int, size int64) (*logFS, error) {
	out := &logFS{FS: fsys}
	zeros := make([]byte, min(size, 1<<20))
	for i := range n {
		name := fsys.PathJoin(dir, fmt.Sprintf("%06d%s", i, spareSuffix))
		if err := writeZeros(fsys, name, zeros, size); err != nil {
			return nil, err
		}
		out.spares = append(out.spares, name)
	}
	if err := syncDir(fsys, dir); err != nil {
		return nil, err
	}
	return out, nil
}

func writeZeros(fsys vfs.FS, name string, zeros []byte, size int64) (err error) {
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	for left := size; left > 0; left -= int64(len(zeros)) {
		if _, err := f.Write(zeros[:min(left, int64(len(zeros)))]); err != nil {
			return err
		}
	}
	return f.Sync()
}

// removeSpareLogs deletes the prepared files in dir.
func removeSpareLogs(fsys vfs.FS, dir string) error {
	names, err := fsys.List(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.HasSuffix(name, spareSuffix) {
			if err := fsys.Remove(fsys.PathJoin(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

func syncDir(fsys vfs.FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
