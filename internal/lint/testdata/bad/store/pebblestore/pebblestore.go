package pebblestore

import (
	"github.com/cockroachdb/pebble"

	"github.com/herald-mq/herald/store"
)

var _ pebble.Options
var _ store.Backend
