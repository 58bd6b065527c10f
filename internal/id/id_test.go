package id

import (
	"regexp"
	"testing"
)

// TestDelivery: a delivery id is "d" and 128 random bits in lower-case unpadded
// base32, and no two are alike.
func TestDelivery(t *testing.T) {
	form := regexp.MustCompile(`^d[a-z2-7]{26}$`)
	seen := map[string]bool{}
	for range 10000 {
		id := Delivery()
		if !form.MatchString(id) {
			t.Fatalf("delivery id %q: want d and 26 base32 characters", id)
		}
		if seen[id] {
			t.Fatalf("delivery id %q made twice", id)
		}
		seen[id] = true
	}
}

// TestToken: a token of n bytes is URL-safe base64 of their length, and no two are
// alike.
func TestToken(t *testing.T) {
	form := regexp.MustCompile(`^[A-Za-z0-9_-]{16}$`)
	seen := map[string]bool{}
	for range 10000 {
		tok := Token(12)
		if !form.MatchString(tok) {
			t.Fatalf("token %q: want 16 URL-safe base64 characters", tok)
		}
		if seen[tok] {
			t.Fatalf("token %q made twice", tok)
		}
		seen[tok] = true
	}
}
