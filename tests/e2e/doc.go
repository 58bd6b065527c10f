// Package e2e holds end-to-end tests that build the real herald binary, run
// "herald serve" on a free local port with a temporary data directory, and drive it over HTTP.
// They cover the query acceptance path, kill -9 durability, error answers and graceful shutdown.
package e2e
