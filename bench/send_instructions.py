"""Instructions the server executes per SEND, counted by valgrind: a before/after figure a busy host cannot blur.

The server runs in process (``build_server`` on a ``MemoryReactorClock``, the real SQLite store, commits inline) and
is fed pre-encoded SENDs of 100-byte messages in reads of 400 frames (``--batch N``: SENDs of N-message batches, in
reads of 40; ``--per-read N``: N frames a read), each read followed by its commit. valgrind counts the instructions
of feeding all the SENDs built and of feeding a sixth of them; the difference per SEND is the figure (start-up and
frame building cancel out).

Run: ``python bench/send_instructions.py [--batch 100] CHECKOUT [CHECKOUT...]`` (each checkout with its own
``.venv``; needs ``valgrind``). Alone, ``python bench/send_instructions.py --feed BUILT FED`` is the fed process.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from instruction_harness import in_process_server, instructions

#: SENDs built, and fed in the shorter run.
BUILT, SHORT = 12_000, 2_000


def feed(built: int, fed: int, batch: int, per_read: int) -> None:
    """Build ``built`` SENDs and feed the first ``fed`` to an in-process server (the checkout in the working
    directory)."""
    reactor, connection, transport = in_process_server()
    from wire.batch import build_batch
    from wire.commands import make
    from wire.framing import FrameDecoder, encode_command, encode_payload_command, make_body
    from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata, SingleMessageMetadata

    connection.dataReceived(encode_command(make(BaseCommand.CONNECT, client_version="bench", protocol_version=21)))
    topic = "persistent://public/default/send-instructions"
    connection.dataReceived(encode_command(make(BaseCommand.PRODUCER, topic=topic, producer_id=1, request_id=1)))
    reactor.advance(0)
    reactor.advance(0)
    answers = [frame.command for frame in FrameDecoder().feed(transport.value())]
    name = next(c.producer_success.producer_name for c in answers if c.type == BaseCommand.PRODUCER_SUCCESS)
    transport.clear()
    payload = b"x" * 100
    if batch:
        payload = build_batch([(SingleMessageMetadata(payload_size=100), b"x" * 100)] * batch)
    reads = []
    for start in range(0, built, per_read):
        frames = []
        for sequence_id in range(start, start + per_read):
            meta = MessageMetadata(producer_name=name, sequence_id=sequence_id, publish_time=1_700_000_000_000)
            if batch:
                meta.num_messages_in_batch = batch
            send = make(BaseCommand.SEND, producer_id=1, sequence_id=sequence_id, num_messages=batch or 1)
            frames.append(encode_payload_command(send, make_body(meta, payload)))
        reads.append(b"".join(frames))
    for data in reads[: fed // per_read]:
        connection.dataReceived(data)
        reactor.advance(0)
        transport.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs="*", type=Path)
    parser.add_argument("--batch", type=int, default=0, help="messages per SEND (0: non-batched)")
    parser.add_argument("--per-read", type=int, help="SENDs per read (default 400, batched 40)")
    parser.add_argument("--feed", nargs=2, type=int, metavar=("BUILT", "FED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    per_read = args.per_read or (40 if args.batch else 400)
    if args.feed:
        feed(*args.feed, args.batch, per_read)
        return
    built, short = (BUILT, SHORT) if not args.batch else (BUILT // 10, SHORT // 10)
    for checkout in args.checkouts:
        checkout = checkout.resolve()
        options = ["--batch", str(args.batch), "--per-read", str(per_read)]
        count = instructions(__file__, checkout, ["--feed", str(built), str(built), *options]) - instructions(
            __file__, checkout, ["--feed", str(built), str(short), *options]
        )
        kind = f"SEND of {args.batch} messages" if args.batch else "non-batched SEND"
        print(f"{checkout}: {count // (built - short):,} instructions per {kind}", flush=True)


if __name__ == "__main__":
    main()
