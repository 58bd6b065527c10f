// Package standing is the standing query, once for both modes: it compiles a WATCH into
// an immutable typed Query (shared by identical opens), decides and projects a node,
// runs and diffs joins, indexes which queries a change can concern, and runs the
// open-time checks. Its Core, one per engine, is the only writer of _Watch nodes and
// keeps the handles and watches of both modes, on which PAUSE, RESUME, CANCEL and ALTER
// WATCH act.
//
// The watch package streams a Query's changes (watch mode); the delivery package leases
// its matches (consume mode). Both attach to the engine's Core when they start and
// detach when they stop.
package standing
