// Package heraldv1 holds the protobuf messages of Herald's RPC contract, generated from
// herald.proto; heraldv1connect holds the Connect client and handler of its service.
// The generated files are committed: after editing herald.proto, run generate.sh.
package heraldv1

//go:generate ./generate.sh
