package main

import (
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// startProfile starts a CPU profile of this process into the file at path (created or
// truncated); the returned function stops it and closes the file. An empty path starts
// nothing.
func startProfile(path string) (stop func(), err error) {
	return startInto(path, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// startTrace is startProfile for an execution trace (go tool trace).
func startTrace(path string) (stop func(), err error) {
	return startInto(path, trace.Start, trace.Stop)
}

func startInto(path string, start func(io.Writer) error, end func()) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { end(); f.Close() }, nil
}
