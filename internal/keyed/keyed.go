// Package keyed serializes work per key: Lock(k) excludes other holders of k only, and
// a key's mutex lives only while someone holds or waits for it.
package keyed

import "sync"

// Mutex is a set of mutexes by key. The zero value is ready.
type Mutex struct {
	mu    sync.Mutex
	locks map[string]*entry
}

type entry struct {
	sync.Mutex
	refs int
}

// Lock waits for key's mutex and returns the func that releases it.
func (m *Mutex) Lock(key string) (unlock func()) {
	m.mu.Lock()
	e := m.locks[key]
	if e == nil {
		if m.locks == nil {
			m.locks = map[string]*entry{}
		}
		e = &entry{}
		m.locks[key] = e
	}
	e.refs++
	m.mu.Unlock()
	e.Lock()
	return func() {
		e.Unlock()
		m.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(m.locks, key)
		}
		m.mu.Unlock()
	}
}

// Len is how many keys are held or waited for.
func (m *Mutex) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.locks)
}
