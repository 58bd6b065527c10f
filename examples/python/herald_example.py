#!/usr/bin/env python3
"""Publish, consume and acknowledge messages on Herald from Python, over gRPC.

It uses the queue service herald.v1.Queues through the stubs generated from
api/heraldv1/herald.proto (herald_pb2.py, herald_pb2_grpc.py; generate.sh makes them):
it creates a queue, enqueues three messages, consumes them from a stream, acknowledges
each one, and deletes the queue, which is empty by then.

    python3 herald_example.py [ADDRESS]

ADDRESS is the broker's host:port (default: $HERALD_GRPC, else 127.0.0.1:7420). For a
broker with TLS set HERALD_CA to the CA file that signed its certificate; for one
started with --auth set HERALD_TOKEN to a bearer token (herald token create).
"""

import os
import sys
import uuid

import grpc
from google.protobuf import duration_pb2

import herald_pb2 as pb
import herald_pb2_grpc as pb_grpc


def channel(address):
    """A channel to the broker: TLS when HERALD_CA names a CA file, plain otherwise."""
    ca = os.environ.get("HERALD_CA")
    if ca:
        with open(ca, "rb") as f:
            return grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=f.read()))
    return grpc.insecure_channel(address)


def metadata():
    """The call metadata: the bearer token of HERALD_TOKEN, if set."""
    token = os.environ.get("HERALD_TOKEN")
    return [("authorization", "Bearer " + token)] if token else []


def main():
    address = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HERALD_GRPC", "127.0.0.1:7420")
    md = metadata()
    with channel(address) as ch:
        queues = pb_grpc.QueuesStub(ch)
        name = "python-example-" + uuid.uuid4().hex[:8]
        queues.CreateQueue(
            pb.CreateQueueRequest(name=name, visibility_timeout=duration_pb2.Duration(seconds=30)),
            metadata=md, timeout=30)

        # Publish: each Enqueue answers once the message is durable.
        for i in range(3):
            queues.Enqueue(
                pb.EnqueueRequest(queue=name, payload=("hello %d" % i).encode(), headers={"n": str(i)}),
                metadata=md, timeout=30)
        print("published 3 messages to", name)

        # Consume: a stream of leased messages; each is acknowledged by its id. Ending
        # the stream gives back whatever is still leased to it.
        stream = queues.ConsumeQueue(pb.ConsumeQueueRequest(queue=name), metadata=md, timeout=60)
        got, last = 0, ""
        try:
            for msg in stream:
                print("consumed %s (n=%s, attempt %d)" % (msg.payload.decode(), msg.headers["n"], msg.attempt_count))
                queues.Ack(pb.QueueAckRequest(queue=name, message_id=msg.message_id), metadata=md, timeout=30)
                got, last = got + 1, msg.message_id
                if got == 3:
                    break
        finally:
            stream.cancel()
        print("acknowledged", got)

        # Errors carry the gRPC code of Herald's error table, and Herald's own code in
        # the "herald-code" trailer: an acknowledged message is gone.
        try:
            queues.Ack(pb.QueueAckRequest(queue=name, message_id=last), metadata=md, timeout=30)
        except grpc.RpcError as err:
            code = dict(err.trailing_metadata() or ()).get("herald-code", "")
            print("acknowledging it again:", err.code().name, code)

        deleted = queues.DeleteQueue(pb.DeleteQueueRequest(name=name), metadata=md, timeout=30)
        print("messages left in the queue:", deleted.messages_deleted)


if __name__ == "__main__":
    main()
