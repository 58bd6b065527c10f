// Package herald holds Herald's domain types: values, nodes, edges, change sets,
// ticks, the coded Error type and the Clock interface.
// Every other package speaks in these types; this package imports only the standard library.
package herald
