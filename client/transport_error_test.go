package client

import (
	"errors"
	"io"
	"sync"
	"testing"

	"connectrpc.com/connect"
)

// Connect can return one *connect.Error value to several streams at once (the error
// of a final envelope with protocol flags is a package variable), and reading its
// metadata allocates the map on first use. Two subscriptions whose streams end
// together must be able to convert it at the same time; -race catches the write
// otherwise.
func TestFromConnectOnASharedError(t *testing.T) {
	shared := connect.NewError(connect.CodeUnknown, io.EOF)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fromConnect(shared); !errors.Is(err, io.EOF) {
				t.Errorf("fromConnect = %v, want the error itself", err)
			}
		}()
	}
	wg.Wait()
}
