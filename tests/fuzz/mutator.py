"""Structure-aware frames for the fuzzer: a valid command of every type a client may send, then mutated fields.

Everything comes from one seeded ``random.Random``, so a seed replays the same frames. A command starts valid (its
required fields filled from small pools of ids and topics, so that it reaches producers, consumers and
transactions that exist), then fields are set to boundary values of their protobuf type (huge, negative, zero),
strings to bytes that are not UTF-8, optional fields added or left out; SENDs get mutated message metadata, batches,
compression headers and truncated or oversized payloads; a few frames are damaged at the byte level.
"""

from __future__ import annotations

import collections
import random
import struct
import time

import crc32c
from google.protobuf.descriptor import FieldDescriptor

from wire.batch import build_batch
from wire.commands import FIELD_OF_TYPE, make
from wire.compression import compress
from wire.framing import DEFAULT_MAX_MESSAGE_SIZE, encode_command, encode_payload_command, make_body
from wire.pulsar_api_pb2 import BaseCommand, CompressionType, MessageMetadata, SingleMessageMetadata

T = BaseCommand
#: Stands for a string that is not UTF-8: replaced in the encoded frame by bytes of the same length.
BAD_UTF8_MARK = b"~\x7f~"
_BAD_UTF8 = b"\xff\xfe\xc3"
#: Not drawn as generic commands: CONNECT opens each session, SEND is built by ``send_frame``, ERROR is only sent by
#: servers (its name lacks the suffixes below), the harness ends each burst with a PING, AUTH_RESPONSE is inert.
_SKIP = {T.CONNECT, T.CONNECTED, T.SEND, T.ERROR, T.PING, T.AUTH_CHALLENGE, T.AUTH_RESPONSE}
_SERVER_ONLY_SUFFIXES = ("_RESPONSE", "_RECEIPT", "SUCCESS", "_ERROR", "CONNECTED")
_INT_BOUNDS = {
    FieldDescriptor.TYPE_INT32: (-(1 << 31), (1 << 31) - 1),
    FieldDescriptor.TYPE_SINT32: (-(1 << 31), (1 << 31) - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(1 << 31), (1 << 31) - 1),
    FieldDescriptor.TYPE_UINT32: (0, (1 << 32) - 1),
    FieldDescriptor.TYPE_FIXED32: (0, (1 << 32) - 1),
    FieldDescriptor.TYPE_INT64: (-(1 << 63), (1 << 63) - 1),
    FieldDescriptor.TYPE_SINT64: (-(1 << 63), (1 << 63) - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(1 << 63), (1 << 63) - 1),
    FieldDescriptor.TYPE_UINT64: (0, (1 << 64) - 1),
    FieldDescriptor.TYPE_FIXED64: (0, (1 << 64) - 1),
}
_ID_FIELDS = {"producer_id", "consumer_id", "request_id", "tc_id", "txnid_least_bits", "txnid_most_bits"}
_CODECS = [
    CompressionType.NONE,
    CompressionType.LZ4,
    CompressionType.ZLIB,
    CompressionType.ZSTD,
    CompressionType.SNAPPY,
]


def client_command_types() -> list[int]:
    """Every command type a client may send (the server answers the others by closing the connection)."""
    kinds = []
    for kind in FIELD_OF_TYPE:
        name = T.Type.Name(kind)
        if kind in _SKIP or name.endswith(_SERVER_ONLY_SUFFIXES) or name in ("MESSAGE", "ACTIVE_CONSUMER_CHANGE"):
            continue
        if name in ("REACHED_END_OF_TOPIC", "TOPIC_MIGRATED", "WATCH_TOPIC_UPDATE"):
            continue
        kinds.append(kind)
    return kinds


class Mutator:
    """Builds fuzzed frames for one session; ``topics`` are the topics its producers and consumers use."""

    def __init__(self, rng: random.Random, topics: list[str], rate: float = 0.15) -> None:
        self.rng = rng
        self.topics = topics
        self.rate = rate
        self.kinds = client_command_types()
        #: The latest transactions the server opened for this session (from NEW_TXN_RESPONSE), for later commands.
        self.txns: list[tuple[int, int]] = []
        #: Every transaction the server opened for this session, to be aborted at the end of a run.
        self.opened: set[tuple[int, int]] = set()
        #: Producer ids of this connection the server made ready (SENDs go to them; a SEND to another closes it).
        self.ready: set[int] = set()
        #: The server's answers by command type, ``/error`` when they carry an error: how deep the frames reached.
        self.answers: collections.Counter[str] = collections.Counter()
        #: Entry ids the server gave (receipts and messages), for ACK, SEEK and REDELIVER.
        self.entries: list[tuple[int, int]] = [(0, 0)]

    # -- values -----------------------------------------------------------------------------------

    def boundary(self, field: FieldDescriptor) -> object:
        """A value at or near the edge of the field's type."""
        rng = self.rng
        kind = field.type
        if kind in _INT_BOUNDS:
            low, high = _INT_BOUNDS[kind]
            return rng.choice([low, high, 0, 1, low + 1, high - 1, (high + 1) // 2, rng.randint(low, high)])
        if kind == FieldDescriptor.TYPE_BOOL:
            return rng.random() < 0.5
        if kind == FieldDescriptor.TYPE_ENUM:
            return rng.choice(field.enum_type.values).number
        if kind == FieldDescriptor.TYPE_STRING:
            return rng.choice(
                ["", "~\x7f~", "x~\x7f~y", "a" * rng.choice([1, 300, 70000]), "/", "é\x00", "public/default"]
            )
        if kind == FieldDescriptor.TYPE_BYTES:
            return rng.randbytes(rng.choice([0, 1, 7, 8, 9, 64]))
        if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
            return rng.choice([0.0, -1.0, 1e300 if kind == FieldDescriptor.TYPE_DOUBLE else 1e30])
        raise ValueError(f"no boundary for field type {kind}")

    def plausible(self, field: FieldDescriptor) -> object:
        """A value a well-behaved client could send, pointed at this session's producers, consumers and topics."""
        rng = self.rng
        name = field.name
        if name in ("topic", "partitions") or name.endswith("topic"):
            return rng.choice(self.topics)
        if name == "namespace":
            return "public/default"
        if name in ("subscription", "consumer_name", "producer_name"):
            return rng.choice(["fz-a", "fz-b"])
        if name in ("txnid_most_bits", "txnid_least_bits") and self.txns:
            most, least = rng.choice(self.txns)
            return most if name == "txnid_most_bits" else least
        if name in _ID_FIELDS:
            return rng.randint(0, 3)
        if name in ("ledgerId", "entryId"):
            return rng.choice(self.entries)[name == "entryId"]
        if name == "messagePermits":
            return rng.randint(1, 100)
        if field.type == FieldDescriptor.TYPE_ENUM:
            return rng.choice(field.enum_type.values).number
        if field.type == FieldDescriptor.TYPE_STRING:
            return rng.choice(["k", "v", "fz"])
        if field.type == FieldDescriptor.TYPE_BYTES:
            return b""
        if field.type == FieldDescriptor.TYPE_BOOL:
            return False
        if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
            return 0.0
        return rng.randint(0, 5)

    # -- messages ------------------------------------------------------------------------------------

    def fill(self, message: object, depth: int = 0) -> None:
        """Set the required fields (recursively) and some optional ones to plausible values."""
        for field in message.DESCRIPTOR.fields:  # type: ignore[attr-defined]
            wanted = field.is_required or (depth < 2 and self.rng.random() < 0.3)
            if not wanted:
                continue
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                if depth >= 3:
                    continue
                child = getattr(message, field.name).add() if field.is_repeated else getattr(message, field.name)
                self.fill(child, depth + 1)
                if not field.is_repeated:
                    child.SetInParent()
            elif field.is_repeated:
                getattr(message, field.name).append(self.plausible(field))
            else:
                setattr(message, field.name, self.plausible(field))

    def mutate(self, message: object, depth: int = 0) -> None:
        """Set some fields to boundary values, clear some, recurse into sub-messages."""
        rng = self.rng
        for field in message.DESCRIPTOR.fields:  # type: ignore[attr-defined]
            if rng.random() >= self.rate:
                continue
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                if depth < 3:
                    children = getattr(message, field.name)
                    child = children.add() if field.is_repeated else children
                    self.fill(child, depth + 1)
                    self.mutate(child, depth + 1)
            elif field.is_repeated:
                values = getattr(message, field.name)
                values.extend(self.boundary(field) for _ in range(rng.choice([1, 2, 100])))
            elif rng.random() < 0.1 and not field.is_required:
                message.ClearField(field.name)  # type: ignore[attr-defined]
            else:
                setattr(message, field.name, self.boundary(field))

    # -- frames ------------------------------------------------------------------------------------

    def frames(self) -> list[bytes]:
        """The next fuzzed frames: mostly one, sometimes a transaction's life on one topic."""
        if self.txns and self.ready and self.rng.random() < 0.05:
            return self.txn_sequence()
        return [self.frame()]

    def txn_sequence(self) -> list[bytes]:
        """A transaction the server opened, on one fuzz topic, some commands mutated: add the partition, send in
        it, add the subscription, acknowledge in it, and (mostly) commit or abort it."""
        rng = self.rng
        most, least = rng.choice(self.txns)
        txn = {"txnid_most_bits": most, "txnid_least_bits": least}
        index = rng.choice(sorted(self.ready))
        topic = self.topics[index]
        ledger, entry = rng.choice(self.entries)
        commands = [
            make(T.ADD_PARTITION_TO_TXN, request_id=rng.randint(0, 3), partitions=[topic], **txn),
            make(
                T.ADD_SUBSCRIPTION_TO_TXN,
                request_id=rng.randint(0, 3),
                subscription=[{"topic": topic, "subscription": f"fz-{index % 2}"}],
                **txn,
            ),
            make(
                T.ACK,
                consumer_id=index,
                ack_type=rng.randrange(2),
                message_id=[{"ledgerId": ledger, "entryId": entry}],
                request_id=rng.randint(0, 3),
                **txn,
            ),
        ]
        if rng.random() < 0.8:
            commands.append(make(T.END_TXN, request_id=rng.randint(0, 3), txn_action=rng.randrange(2), **txn))
        for command in commands:
            if rng.random() < 0.3:
                self.mutate(getattr(command, FIELD_OF_TYPE[command.type]))
        data = [encode_command(command).replace(BAD_UTF8_MARK, _BAD_UTF8) for command in commands]
        data.insert(1, self.send_frame(index, (most, least)))
        return data

    def frame(self) -> bytes:
        """One fuzzed frame."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.35:
            data = self.send_frame()
        else:
            kind = rng.choice(self.kinds)
            command = BaseCommand(type=kind)
            payload = getattr(command, FIELD_OF_TYPE[kind])
            self.fill(payload)
            payload.SetInParent()
            if rng.random() < 0.7:
                self.mutate(payload)
            if kind == T.CLOSE_PRODUCER:
                self.ready.discard(payload.producer_id)
            data = encode_command(command)
        data = data.replace(BAD_UTF8_MARK, _BAD_UTF8)
        if rng.random() < 0.01:
            data = self.damage(data)
        return data

    def damage(self, data: bytes) -> bytes:
        """Byte-level damage: a flipped byte, a truncation, or a wrong frame size."""
        rng = self.rng
        choice = rng.randrange(3)
        if choice == 0 and len(data) > 8:
            index = rng.randrange(8, len(data))
            return data[:index] + bytes([data[index] ^ (1 << rng.randrange(8))]) + data[index + 1 :]
        if choice == 1:
            cut = rng.randrange(8, max(len(data), 9))
            return struct.pack(">I", cut - 4) + data[4:cut]
        return struct.pack(">I", rng.choice([0, 3, DEFAULT_MAX_MESSAGE_SIZE * 2])) + data[4:]

    def send_frame(self, producer_id: int | None = None, txn: tuple[int, int] | None = None) -> bytes:
        """A SEND with mutated metadata, batch and payload (from ``producer_id`` in ``txn`` if given)."""
        rng = self.rng
        sequence_id = rng.randint(0, 1 << 20)
        metadata = MessageMetadata(
            producer_name=rng.choice(["fz-a", "fz-b"]), sequence_id=sequence_id, publish_time=int(time.time() * 1000)
        )
        payload = rng.randbytes(rng.choice([0, 1, 16, 200]))
        count = 1
        if rng.random() < 0.3:
            count = rng.choice([1, 2, 5])
            payload = build_batch(
                [
                    (SingleMessageMetadata(partition_key=rng.choice(["k1", "k2"])), rng.randbytes(8))
                    for _ in range(count)
                ]
            )
            metadata.num_messages_in_batch = count
        if rng.random() < 0.2:
            codec = rng.choice(_CODECS)
            metadata.uncompressed_size = len(payload)
            payload = compress(codec, payload)
            metadata.compression = codec
        if rng.random() < 0.5:
            self.mutate(metadata)
        if rng.random() < 0.05:
            payload = payload[: rng.randrange(len(payload) + 1)]
        elif rng.random() < 0.02:
            payload += rng.randbytes(rng.choice([1000, 100_000]))
        command = BaseCommand(type=T.SEND)
        send = command.send
        if producer_id is None:
            producer_id = rng.choice(sorted(self.ready)) if self.ready and rng.random() < 0.99 else rng.randint(0, 3)
        send.producer_id = producer_id
        send.sequence_id = sequence_id
        send.num_messages = count
        if txn is None and rng.random() < 0.2 and self.txns:
            txn = rng.choice(self.txns)
        if txn is not None:
            send.txnid_most_bits, send.txnid_least_bits = txn
        if rng.random() < 0.3:
            self.mutate(send)
            if rng.random() < 0.9:
                send.producer_id = producer_id  # a SEND to a producer that is not ready closes the connection
        body = make_body(metadata.SerializeToString().replace(BAD_UTF8_MARK, _BAD_UTF8), payload)
        if rng.random() < 0.02:
            body = body[:2] + struct.pack(">I", crc32c.crc32c(body) ^ 1) + body[6:]
        return encode_payload_command(command, body)

    def learn(self, command: BaseCommand) -> None:
        """Remember transactions and entries the server named, so that later commands can name them."""
        kind = command.type
        payload = getattr(command, FIELD_OF_TYPE[kind])
        failed = any(
            payload.HasField(name) for name in ("error", "error_code") if name in payload.DESCRIPTOR.fields_by_name
        )
        self.answers[T.Type.Name(kind) + ("/error" if failed else "")] += 1
        if kind == T.PRODUCER_SUCCESS and command.producer_success.producer_ready:
            # The session's own producers: request 1000 + i created producer i on topic i (see the harness).
            index = command.producer_success.request_id - 1000
            if 0 <= index < len(self.topics):
                self.ready.add(index)
        elif kind == T.CLOSE_PRODUCER:
            self.ready.discard(command.close_producer.producer_id)
        if kind == T.NEW_TXN_RESPONSE and not command.newTxnResponse.HasField("error"):
            response = command.newTxnResponse
            txn = (response.txnid_most_bits, response.txnid_least_bits)
            self.txns.append(txn)
            self.opened.add(txn)
            del self.txns[:-20]
        elif kind in (T.SEND_RECEIPT, T.MESSAGE):
            message_id = command.send_receipt.message_id if kind == T.SEND_RECEIPT else command.message.message_id
            self.entries.append((message_id.ledgerId, message_id.entryId))
            del self.entries[:-50]
