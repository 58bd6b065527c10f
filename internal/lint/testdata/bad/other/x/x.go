package x

// A module the rules do not name is skipped: this import is not reported.
import _ "github.com/cockroachdb/pebble"
