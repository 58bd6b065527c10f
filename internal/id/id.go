// Package id makes the random identifiers the server hands out: stream and consumer
// ids, session ids and delivery ids. Each is drawn from crypto/rand, so an id that is a
// capability (a session, a delivery) cannot be guessed.
package id

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
)

// Token returns n random bytes in URL-safe base64 without padding.
func Token(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// deliveryEncoding is lower-case base32: a delivery id can be written as `#ident`.
var deliveryEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Delivery returns a delivery id: "d" and 128 random bits in lower-case unpadded base32.
// It is URL-safe and can be written as a string, a $param or an `#ident` in ACK and
// NACK.
func Delivery() string {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	var b [1 + 26]byte // "d" and 16 bytes in unpadded base32
	b[0] = 'd'
	deliveryEncoding.Encode(b[1:], raw[:])
	return string(b[:])
}
