package queue

import (
	"context"

	"github.com/herald-mq/herald"
)

// The queue surfaces' grants are declared per operation (herald.Operations: a pop needs
// consume and settle on QueueItem, a queue RPC consumer consume and settle on
// QueueMessage) and checked before they run. The consume statements they then run are
// their own, not the caller's — a queue's group is shared by every consumer of the
// queue, and its dead-letter destination is a system node — so they run with the
// system's rights in the caller's name (see surface).

// surface returns ctx for a statement a queue surface runs on its caller's behalf: the
// caller's name and limits, with every grant. Leases it makes are still the caller's
// (see holds).
func surface(ctx context.Context) context.Context {
	p := herald.PrincipalFrom(ctx)
	if p == nil {
		return ctx
	}
	return herald.WithPrincipal(ctx, &herald.Principal{Name: p.Name, Grants: []string{herald.ActAdmin},
		StatementTimeout: p.StatementTimeout, MaxRowsScanned: p.MaxRowsScanned})
}

// holds reports whether the principal ctx carries may settle a lease made for holder:
// its own, any lease without authentication, and any lease with admin.
func holds(ctx context.Context, holder string) bool {
	p := herald.PrincipalFrom(ctx)
	return p == nil || holder == "" || holder == p.Name || p.Can(herald.ActAdmin, "")
}
