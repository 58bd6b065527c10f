package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/herald-mq/herald/store"
	"github.com/herald-mq/herald/store/memstore"
)

// countingBackend counts Close calls and can refuse Meta (so the engine cannot open).
type countingBackend struct {
	*memstore.Store
	closes  atomic.Int32
	metaErr error
}

func (b *countingBackend) Close() error {
	b.closes.Add(1)
	return b.Store.Close()
}

func (b *countingBackend) Meta(ctx context.Context) (store.Meta, error) {
	if b.metaErr != nil {
		return store.Meta{}, b.metaErr
	}
	return b.Store.Meta(ctx)
}

// The store is closed exactly once: by the engine that took it over when the server
// stops, or by the server when the engine could not open.
func TestStoreClosedOnce(t *testing.T) {
	ctx := context.Background()
	b := &countingBackend{Store: memstore.New()}
	s := New(Config{Backend: b, Listen: "127.0.0.1:0", Logger: quietLogger()})
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.closes.Load(); n != 1 {
		t.Fatalf("store closed %d times after Stop, want 1", n)
	}

	bad := &countingBackend{Store: memstore.New(), metaErr: errors.New("unreadable")}
	s = New(Config{Backend: bad, Listen: "127.0.0.1:0", Logger: quietLogger()})
	if err := s.Start(ctx); err == nil {
		t.Fatal("started on a store the engine cannot read")
	}
	if n := bad.closes.Load(); n != 1 {
		t.Fatalf("store closed %d times after a failed start, want 1", n)
	}
	_ = s.Stop(ctx)
}
