package bench

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// DiskSync is what the disk probe saw while a scenario ran: how many 4 KB writes it
// synced, and how long the syncs took. A broker that syncs before it answers cannot
// answer faster than its disk syncs, so a stall seen here explains a tail seen there.
type DiskSync struct {
	Syncs int           `json:"syncs"`
	P50   time.Duration `json:"p50_ns"`
	P99   time.Duration `json:"p99_ns"`
	Max   time.Duration `json:"max_ns"`
}

// probeFileSize is the probe file's size: it is written once, then overwritten block
// by block, so that a sync never has to commit a new file length.
const probeFileSize = 4 << 20

// DiskProbe writes a 4 KB block and syncs it every interval, into a file of its own in
// a directory, until it is stopped.
type DiskProbe struct {
	f     *os.File
	every time.Duration
	quit  chan struct{}
	done  chan struct{}
	lat   []time.Duration
	err   error
}

// StartDiskProbe creates its file in dir and starts the probe's goroutine; Stop ends
// the goroutine, removes the file and returns what the probe saw.
func StartDiskProbe(dir string, every time.Duration) (*DiskProbe, error) {
	f, err := os.CreateTemp(dir, "herald-bench-probe-*")
	if err != nil {
		return nil, fmt.Errorf("disk probe: %w", err)
	}
	block := make([]byte, 4096)
	for off := int64(0); off < probeFileSize; off += int64(len(block)) {
		if _, err := f.WriteAt(block, off); err != nil {
			return nil, errors.Join(fmt.Errorf("disk probe: %w", err), f.Close(), os.Remove(f.Name()))
		}
	}
	if err := f.Sync(); err != nil {
		return nil, errors.Join(fmt.Errorf("disk probe: %w", err), f.Close(), os.Remove(f.Name()))
	}
	p := &DiskProbe{f: f, every: every, quit: make(chan struct{}), done: make(chan struct{})}
	go p.run(block)
	return p, nil
}

func (p *DiskProbe) run(block []byte) {
	defer close(p.done)
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	var off int64
	for {
		select {
		case <-p.quit:
			return
		case <-tick.C:
		}
		start := time.Now()
		if _, err := p.f.WriteAt(block, off); err != nil {
			p.err = err
			return
		}
		if err := datasync(p.f); err != nil {
			p.err = err
			return
		}
		p.lat = append(p.lat, time.Since(start))
		off = (off + int64(len(block))) % probeFileSize
	}
}

// Probed runs run with a disk probe beside it in dir (none when dir is empty) and
// returns what the probe saw; run's error comes first, then the probe's.
func Probed(dir string, every time.Duration, run func() error) (*DiskSync, error) {
	if dir == "" {
		return nil, run()
	}
	p, err := StartDiskProbe(dir, every)
	if err != nil {
		return nil, err
	}
	err = run()
	d, perr := p.Stop()
	if err == nil {
		err = perr
	}
	return d, err
}

// Stop ends the probe and returns what it saw; it is nil when no sync completed.
func (p *DiskProbe) Stop() (*DiskSync, error) {
	close(p.quit)
	<-p.done
	name := p.f.Name()
	err := errors.Join(p.err, p.f.Close(), os.Remove(name))
	if err != nil {
		err = fmt.Errorf("disk probe: %w", err)
	}
	if len(p.lat) == 0 {
		return nil, err
	}
	d := &DiskSync{Syncs: len(p.lat)}
	d.P50, d.P99, d.Max = Percentiles(p.lat)
	return d, err
}
