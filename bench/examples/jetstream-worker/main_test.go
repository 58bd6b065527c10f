package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	for i, d := range want {
		if got := backoff(uint64(i + 1)); got != d {
			t.Errorf("backoff(%d) = %v, want %v", i+1, got, d)
		}
	}
	if got := backoff(20); got != time.Minute {
		t.Errorf("backoff(20) = %v, want the cap", got)
	}
}

func TestMailerRejectsBadAddresses(t *testing.T) {
	m := Mailer{Send: func(context.Context, Email) error { return nil }}
	if err := m.Work(context.Background(), Email{To: "nobody"}); !errors.Is(err, errReject) {
		t.Errorf("a bad address: %v, want errReject", err)
	}
	if err := m.Work(context.Background(), Email{To: "ann@example.com"}); err != nil {
		t.Errorf("a good address: %v", err)
	}
}
