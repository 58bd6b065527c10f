package keyed

import (
	"sync"
	"testing"
	"time"
)

func TestOneHolderPerKey(t *testing.T) {
	var m Mutex
	var wg sync.WaitGroup
	inside := map[string]int{}
	var mu sync.Mutex
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []string{"a", "b"}[i%2]
			unlock := m.Lock(key)
			mu.Lock()
			inside[key]++
			if inside[key] > 1 {
				t.Errorf("two holders of %q", key)
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			inside[key]--
			mu.Unlock()
			unlock()
		}()
	}
	wg.Wait()
	if n := m.Len(); n != 0 {
		t.Fatalf("%d keys kept after every holder left", n)
	}
}

func TestKeysDoNotExcludeEachOther(t *testing.T) {
	var m Mutex
	unlockA := m.Lock("a")
	done := make(chan struct{})
	go func() { m.Lock("b")(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("key b waited for key a")
	}
	unlockA()
}
