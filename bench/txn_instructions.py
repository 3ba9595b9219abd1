"""Instructions the server executes per transaction, counted by valgrind: a before/after figure a busy host cannot blur.

The server runs in process (``build_server`` on a ``MemoryReactorClock``, the real SQLite store, commits inline) and
is fed pre-encoded transactions as pulsar-perf's transactional producer sends them, each request in a read of its
own followed by a turn of the reactor: NEW_TXN, ADD_PARTITION_TO_TXN, the transaction's SENDs (100 non-batched
100-byte messages in one read by default; ``--batch``: one SEND of a 100-message batch), then END_TXN (commit).
``--plain`` feeds the same SENDs without a transaction (no NEW_TXN, ADD_PARTITION_TO_TXN or END_TXN), the figure
a transaction is compared with. valgrind counts the instructions of feeding all the transactions built and of
feeding a sixth of them; the difference per transaction is the figure (start-up and frame building cancel out).
``--only NEW_TXN`` (or ``ADD_PARTITION``, ``SENDS``, ``END_TXN``) counts only that step: both runs feed a sixth of
the transactions whole, and the other five sixths up to that step (the longer run) or up to the one before it.

Run: ``python bench/txn_instructions.py [--messages 100] [--batch] [--plain] CHECKOUT [CHECKOUT...]`` (each
checkout with its own ``.venv``; needs ``valgrind``). ``--feed BUILT FED`` is the fed process.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from instruction_harness import in_process_server, instructions

#: Transactions built, and fed in the shorter run.
BUILT, SHORT = 240, 40
STEPS = ("NEW_TXN", "ADD_PARTITION", "SENDS", "END_TXN")


def feed(built: int, fed: int, messages: int, batch: bool, plain: bool, only: str | None, with_only: bool) -> None:
    """Build ``built`` transactions and feed the first ``fed`` to an in-process server (the checkout in the working
    directory); with ``only``, feed the rest up to that step (``with_only``) or up to the step before it."""
    reactor, connection, transport = in_process_server()
    from wire.batch import build_batch
    from wire.commands import make
    from wire.framing import FrameDecoder, encode_command, encode_payload_command, make_body
    from wire.pulsar_api_pb2 import BaseCommand, MessageMetadata, SingleMessageMetadata, TxnAction

    T = BaseCommand  # noqa: N806

    def read(data: bytes) -> list[BaseCommand]:
        transport.clear()
        connection.dataReceived(data)
        reactor.advance(0)
        reactor.advance(0)
        return [frame.command for frame in FrameDecoder().feed(transport.value())]

    read(encode_command(make(T.CONNECT, client_version="bench", protocol_version=21)))
    read(encode_command(make(T.TC_CLIENT_CONNECT_REQUEST, request_id=1, tc_id=0)))
    topic = "persistent://public/default/txn-instructions"
    answers = read(encode_command(make(T.PRODUCER, topic=topic, producer_id=1, request_id=2)))
    name = next(c.producer_success.producer_name for c in answers if c.type == T.PRODUCER_SUCCESS)
    # Transaction ids are handed out in sequence: learn the first, then predict the rest (checked at the end).
    answers = read(encode_command(make(T.NEW_TXN, request_id=3, tc_id=0, txn_ttl_millis=600_000)))
    first = next(c.newTxnResponse for c in answers if c.type == T.NEW_TXN_RESPONSE)
    read(encode_command(make(T.END_TXN, request_id=4, txn_action=TxnAction.ABORT, **_txn(first))))
    most, least = first.txnid_most_bits, first.txnid_least_bits
    payload = b"x" * 100
    batch_payload = build_batch([(SingleMessageMetadata(payload_size=100), payload)] * messages) if batch else b""
    transactions = []
    sequence_id = 0
    for n in range(built):
        txn = {} if plain else {"txnid_most_bits": most, "txnid_least_bits": least + 1 + n}
        request = 10 + 3 * n
        steps = {}
        if not plain:
            steps["NEW_TXN"] = encode_command(make(T.NEW_TXN, request_id=request, tc_id=0, txn_ttl_millis=600_000))
            steps["ADD_PARTITION"] = encode_command(
                make(T.ADD_PARTITION_TO_TXN, request_id=request + 1, partitions=[topic], **txn)
            )
        frames = []
        for _ in range(1 if batch else messages):
            meta = MessageMetadata(producer_name=name, sequence_id=sequence_id, publish_time=1_700_000_000_000)
            if txn:
                meta.txnid_most_bits, meta.txnid_least_bits = txn["txnid_most_bits"], txn["txnid_least_bits"]
            if batch:
                meta.num_messages_in_batch = messages
            send = make(T.SEND, producer_id=1, sequence_id=sequence_id, num_messages=messages if batch else 1, **txn)
            frames.append(encode_payload_command(send, make_body(meta, batch_payload if batch else payload)))
            sequence_id += 1
        steps["SENDS"] = b"".join(frames)
        if not plain:
            steps["END_TXN"] = encode_command(
                make(T.END_TXN, request_id=request + 2, txn_action=TxnAction.COMMIT, **txn)
            )
        transactions.append(steps)
    last: list[BaseCommand] = []
    prefix = STEPS[: STEPS.index(only) + (1 if with_only else 0)] if only else ()
    for n, steps in enumerate(transactions):
        for step, data in steps.items():
            if n < fed or step in prefix:
                last = read(data)
    errors = (T.SEND_ERROR, T.ERROR)
    assert last and all(c.type not in errors and not c.HasField("error") for c in last), last


def _txn(response: object) -> dict[str, int]:
    return {"txnid_most_bits": response.txnid_most_bits, "txnid_least_bits": response.txnid_least_bits}  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs="*", type=Path)
    parser.add_argument("--messages", type=int, default=100, help="messages per transaction (default 100)")
    parser.add_argument("--batch", action="store_true", help="the messages in one batched SEND")
    parser.add_argument("--plain", action="store_true", help="the same SENDs without a transaction")
    parser.add_argument("--only", choices=STEPS, help="count one step of each transaction")
    parser.add_argument("--transactions", type=int, default=BUILT, help=f"transactions built (default {BUILT})")
    parser.add_argument("--feed", nargs=2, type=int, metavar=("BUILT", "FED"), help=argparse.SUPPRESS)
    parser.add_argument("--with-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.feed:
        feed(*args.feed, args.messages, args.batch, args.plain, args.only, args.with_only)
        return
    options = ["--messages", str(args.messages)]
    options += ["--batch"] * args.batch + ["--plain"] * args.plain + (["--only", args.only] if args.only else [])
    built = args.transactions
    short = built // 6
    what = f"{'batched' if args.batch else 'non-batched'} {args.messages}-message"
    what += " group of plain SENDs" if args.plain else " transaction"
    if args.only:
        what += f", {args.only} only"
    for checkout in args.checkouts:
        checkout = checkout.resolve()
        if args.only:
            longer = instructions(__file__, checkout, ["--feed", str(built), str(short), *options, "--with-only"])
        else:
            longer = instructions(__file__, checkout, ["--feed", str(built), str(built), *options])
        count = longer - instructions(__file__, checkout, ["--feed", str(built), str(short), *options])
        print(f"{checkout}: {count // (built - short):,} instructions per {what}", flush=True)


if __name__ == "__main__":
    main()
