package delivery

import (
	"regexp"
	"testing"
)

// TestDeliveryIDs: a delivery id is "d" and 128 random bits in lower-case unpadded
// base32, and no two are alike.
func TestDeliveryIDs(t *testing.T) {
	form := regexp.MustCompile(`^d[a-z2-7]{26}$`)
	seen := map[string]bool{}
	for range 10000 {
		id := newDeliveryID()
		if !form.MatchString(id) {
			t.Fatalf("delivery id %q: want d and 26 base32 characters", id)
		}
		if seen[id] {
			t.Fatalf("delivery id %q made twice", id)
		}
		seen[id] = true
	}
}
