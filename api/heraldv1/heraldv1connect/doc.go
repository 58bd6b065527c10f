// Package heraldv1connect is the generated Connect client and handler of the herald.v1.Herald
// service, serving gRPC, gRPC-Web and the Connect protocol alike.
// It is generated from ../herald.proto by ../generate.sh; do not edit the generated file.
package heraldv1connect
