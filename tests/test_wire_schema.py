"""Checks that wire/pulsar_api.proto matches the facts of the Pulsar wire protocol.

Run with: PYTHONPATH=/work/main .venv/bin/python -m pytest -q tests/test_wire_schema.py
"""

import struct

import pytest
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FieldDescriptor

from wire import pulsar_api_pb2 as pb

# CONNECT frame captured from the official Python client 3.13.0 (bundles C++ client 4.2.0).
CONNECT_FRAME_HEX = (
    "0000002900000025080212210a1150756c7361722d4350502d76342e322e3020142a046e6f6e65520408011001"
)

BASE = pb.BaseCommand.DESCRIPTOR


def _field(message_cls, name):
    fields = message_cls.DESCRIPTOR.fields_by_name
    assert name in fields, f"{message_cls.DESCRIPTOR.name} has no field {name!r}"
    return fields[name]


def _label(fd):
    # protobuf 7 dropped FieldDescriptor.label; derive the proto2 label from the flags.
    if fd.is_required:
        return "required"
    if fd.is_repeated:
        return "repeated"
    return "optional"


# ---------------------------------------------------------------------------
# File-level facts
# ---------------------------------------------------------------------------


def test_file_is_proto2_in_pulsar_proto_package():
    fdp = descriptor_pb2.FileDescriptorProto()
    pb.DESCRIPTOR.CopyToProto(fdp)
    assert fdp.package == "pulsar.proto"
    assert fdp.syntax in ("", "proto2")  # protoc leaves it empty for proto2
    assert pb.BaseCommand.DESCRIPTOR.full_name == "pulsar.proto.BaseCommand"


# ---------------------------------------------------------------------------
# (1) A real CONNECT frame parses
# ---------------------------------------------------------------------------


def _split_simple_frame(frame: bytes) -> bytes:
    total_size, cmd_size = struct.unpack(">II", frame[:8])
    assert total_size == len(frame) - 4
    assert cmd_size == total_size - 4  # simple command: no payload after it
    return frame[8 : 8 + cmd_size]


def test_connect_frame_from_python_client_parses():
    frame = bytes.fromhex(CONNECT_FRAME_HEX)
    assert struct.unpack(">II", frame[:8]) == (0x29, 0x25)
    body = _split_simple_frame(frame)

    cmd = pb.BaseCommand()
    cmd.ParseFromString(body)
    assert cmd.IsInitialized()
    assert cmd.type == pb.BaseCommand.CONNECT
    assert cmd.HasField("connect")

    connect = cmd.connect
    assert connect.client_version == "Pulsar-CPP-v4.2.0"
    assert connect.protocol_version == 20
    assert connect.auth_method_name == "none"
    assert not connect.HasField("auth_data")
    assert connect.HasField("feature_flags")
    assert connect.feature_flags.supports_auth_refresh is True
    assert connect.feature_flags.supports_broker_entry_metadata is True
    assert connect.feature_flags.supports_partial_producer is False
    assert connect.feature_flags.supports_topic_watchers is False

    # Re-encoding gives back the exact bytes (fields are emitted in number order).
    assert cmd.SerializeToString() == body


def test_connect_frame_round_trip_from_scratch():
    cmd = pb.BaseCommand(type=pb.BaseCommand.CONNECT)
    cmd.connect.client_version = "Pulsar-CPP-v4.2.0"
    cmd.connect.protocol_version = 20
    cmd.connect.auth_method_name = "none"
    cmd.connect.feature_flags.supports_auth_refresh = True
    cmd.connect.feature_flags.supports_broker_entry_metadata = True
    body = cmd.SerializeToString()
    frame = struct.pack(">II", len(body) + 4, len(body)) + body
    assert frame.hex() == CONNECT_FRAME_HEX


# ---------------------------------------------------------------------------
# (2) BaseCommand: one sub-message per Type value, same number
# ---------------------------------------------------------------------------


def test_every_type_value_has_a_field_with_that_number():
    type_enum = BASE.enum_types_by_name["Type"]
    missing = [v.name for v in type_enum.values if v.number not in BASE.fields_by_number]
    assert missing == []
    for value in type_enum.values:
        fd = BASE.fields_by_number[value.number]
        assert fd.type == FieldDescriptor.TYPE_MESSAGE, value.name
        assert _label(fd) == "optional", value.name


def test_every_sub_message_field_has_a_type_value():
    type_numbers = {v.number for v in BASE.enum_types_by_name["Type"].values}
    for fd in BASE.fields:
        if fd.name == "type":
            assert fd.number == 1
            assert _label(fd) == "required"
            continue
        assert fd.number in type_numbers, fd.name


@pytest.mark.parametrize(
    ("type_name", "number", "field_name", "message_name"),
    [
        ("CONNECT", 2, "connect", "CommandConnect"),
        ("CONNECTED", 3, "connected", "CommandConnected"),
        ("SUBSCRIBE", 4, "subscribe", "CommandSubscribe"),
        ("PRODUCER", 5, "producer", "CommandProducer"),
        ("SEND", 6, "send", "CommandSend"),
        ("SEND_RECEIPT", 7, "send_receipt", "CommandSendReceipt"),
        ("SEND_ERROR", 8, "send_error", "CommandSendError"),
        ("MESSAGE", 9, "message", "CommandMessage"),
        ("ACK", 10, "ack", "CommandAck"),
        ("FLOW", 11, "flow", "CommandFlow"),
        ("UNSUBSCRIBE", 12, "unsubscribe", "CommandUnsubscribe"),
        ("SUCCESS", 13, "success", "CommandSuccess"),
        ("ERROR", 14, "error", "CommandError"),
        ("CLOSE_PRODUCER", 15, "close_producer", "CommandCloseProducer"),
        ("CLOSE_CONSUMER", 16, "close_consumer", "CommandCloseConsumer"),
        ("PRODUCER_SUCCESS", 17, "producer_success", "CommandProducerSuccess"),
        ("PING", 18, "ping", "CommandPing"),
        ("PONG", 19, "pong", "CommandPong"),
        (
            "REDELIVER_UNACKNOWLEDGED_MESSAGES",
            20,
            "redeliverUnacknowledgedMessages",
            "CommandRedeliverUnacknowledgedMessages",
        ),
        ("PARTITIONED_METADATA", 21, "partitionMetadata", "CommandPartitionedTopicMetadata"),
        (
            "PARTITIONED_METADATA_RESPONSE",
            22,
            "partitionMetadataResponse",
            "CommandPartitionedTopicMetadataResponse",
        ),
        ("LOOKUP", 23, "lookupTopic", "CommandLookupTopic"),
        ("LOOKUP_RESPONSE", 24, "lookupTopicResponse", "CommandLookupTopicResponse"),
        ("CONSUMER_STATS", 25, "consumerStats", "CommandConsumerStats"),
        ("CONSUMER_STATS_RESPONSE", 26, "consumerStatsResponse", "CommandConsumerStatsResponse"),
        ("REACHED_END_OF_TOPIC", 27, "reachedEndOfTopic", "CommandReachedEndOfTopic"),
        ("SEEK", 28, "seek", "CommandSeek"),
        ("GET_LAST_MESSAGE_ID", 29, "getLastMessageId", "CommandGetLastMessageId"),
        (
            "GET_LAST_MESSAGE_ID_RESPONSE",
            30,
            "getLastMessageIdResponse",
            "CommandGetLastMessageIdResponse",
        ),
        ("ACTIVE_CONSUMER_CHANGE", 31, "active_consumer_change", "CommandActiveConsumerChange"),
        ("GET_TOPICS_OF_NAMESPACE", 32, "getTopicsOfNamespace", "CommandGetTopicsOfNamespace"),
        (
            "GET_TOPICS_OF_NAMESPACE_RESPONSE",
            33,
            "getTopicsOfNamespaceResponse",
            "CommandGetTopicsOfNamespaceResponse",
        ),
        ("GET_SCHEMA", 34, "getSchema", "CommandGetSchema"),
        ("GET_SCHEMA_RESPONSE", 35, "getSchemaResponse", "CommandGetSchemaResponse"),
        ("AUTH_CHALLENGE", 36, "authChallenge", "CommandAuthChallenge"),
        ("AUTH_RESPONSE", 37, "authResponse", "CommandAuthResponse"),
        ("ACK_RESPONSE", 38, "ackResponse", "CommandAckResponse"),
        ("GET_OR_CREATE_SCHEMA", 39, "getOrCreateSchema", "CommandGetOrCreateSchema"),
        (
            "GET_OR_CREATE_SCHEMA_RESPONSE",
            40,
            "getOrCreateSchemaResponse",
            "CommandGetOrCreateSchemaResponse",
        ),
        ("NEW_TXN", 50, "newTxn", "CommandNewTxn"),
        ("NEW_TXN_RESPONSE", 51, "newTxnResponse", "CommandNewTxnResponse"),
        ("ADD_PARTITION_TO_TXN", 52, "addPartitionToTxn", "CommandAddPartitionToTxn"),
        (
            "ADD_PARTITION_TO_TXN_RESPONSE",
            53,
            "addPartitionToTxnResponse",
            "CommandAddPartitionToTxnResponse",
        ),
        ("ADD_SUBSCRIPTION_TO_TXN", 54, "addSubscriptionToTxn", "CommandAddSubscriptionToTxn"),
        (
            "ADD_SUBSCRIPTION_TO_TXN_RESPONSE",
            55,
            "addSubscriptionToTxnResponse",
            "CommandAddSubscriptionToTxnResponse",
        ),
        ("END_TXN", 56, "endTxn", "CommandEndTxn"),
        ("END_TXN_RESPONSE", 57, "endTxnResponse", "CommandEndTxnResponse"),
        ("END_TXN_ON_PARTITION", 58, "endTxnOnPartition", "CommandEndTxnOnPartition"),
        (
            "END_TXN_ON_PARTITION_RESPONSE",
            59,
            "endTxnOnPartitionResponse",
            "CommandEndTxnOnPartitionResponse",
        ),
        ("END_TXN_ON_SUBSCRIPTION", 60, "endTxnOnSubscription", "CommandEndTxnOnSubscription"),
        (
            "END_TXN_ON_SUBSCRIPTION_RESPONSE",
            61,
            "endTxnOnSubscriptionResponse",
            "CommandEndTxnOnSubscriptionResponse",
        ),
        (
            "TC_CLIENT_CONNECT_REQUEST",
            62,
            "tcClientConnectRequest",
            "CommandTcClientConnectRequest",
        ),
        (
            "TC_CLIENT_CONNECT_RESPONSE",
            63,
            "tcClientConnectResponse",
            "CommandTcClientConnectResponse",
        ),
        ("WATCH_TOPIC_LIST", 64, "watchTopicList", "CommandWatchTopicList"),
        ("WATCH_TOPIC_LIST_SUCCESS", 65, "watchTopicListSuccess", "CommandWatchTopicListSuccess"),
        ("WATCH_TOPIC_UPDATE", 66, "watchTopicUpdate", "CommandWatchTopicUpdate"),
        ("WATCH_TOPIC_LIST_CLOSE", 67, "watchTopicListClose", "CommandWatchTopicListClose"),
        ("TOPIC_MIGRATED", 68, "topicMigrated", "CommandTopicMigrated"),
        ("SCALABLE_TOPIC_LOOKUP", 70, "scalableTopicLookup", "CommandScalableTopicLookup"),
        ("WATCH_TC_ASSIGNMENTS_CLOSE", 81, "watchTcAssignmentsClose", "CommandWatchTcAssignmentsClose"),
    ],
)
def test_base_command_names(type_name, number, field_name, message_name):
    assert pb.BaseCommand.Type.Value(type_name) == number
    fd = BASE.fields_by_number[number]
    assert fd.name == field_name
    assert fd.message_type.name == message_name


def test_type_enum_has_no_gaps_except_reserved_ranges():
    numbers = sorted(v.number for v in BASE.enum_types_by_name["Type"].values)
    assert numbers[0] == 2
    assert set(range(2, 41)) <= set(numbers)
    assert set(range(50, 69)) <= set(numbers)
    assert not set(range(41, 50)) & set(numbers)


# ---------------------------------------------------------------------------
# (3) Defaults
# ---------------------------------------------------------------------------


def test_defaults():
    mid = pb.MessageIdData()
    assert mid.partition == -1
    assert mid.batch_index == -1

    assert pb.MessageMetadata().num_messages_in_batch == 1
    assert pb.MessageMetadata().compression == pb.NONE
    assert pb.CommandSend().num_messages == 1

    ps = pb.CommandProducerSuccess()
    assert ps.last_sequence_id == -1
    assert ps.producer_ready is True

    sub = pb.CommandSubscribe()
    assert sub.durable is True
    assert sub.force_topic_creation is True
    assert sub.initialPosition == pb.CommandSubscribe.Latest
    assert sub.initialPosition == 0

    assert pb.CommandProducer().user_provided_producer_name is True
    assert pb.CommandProducer().producer_access_mode == pb.Shared
    assert pb.CommandPartitionedTopicMetadata().metadata_auto_creation_enabled is True
    assert pb.CommandGetTopicsOfNamespace().mode == pb.CommandGetTopicsOfNamespace.PERSISTENT
    assert pb.CommandGetTopicsOfNamespaceResponse().changed is True
    assert pb.CommandConnect().protocol_version == 0


def test_defaults_are_not_set_on_the_wire():
    mid = pb.MessageIdData(ledgerId=1, entryId=2)
    assert not mid.HasField("partition")
    assert mid.SerializeToString() == bytes([0x08, 0x01, 0x10, 0x02])


# ---------------------------------------------------------------------------
# (4) Enums
# ---------------------------------------------------------------------------

SERVER_ERRORS = [
    "UnknownError",
    "MetadataError",
    "PersistenceError",
    "AuthenticationError",
    "AuthorizationError",
    "ConsumerBusy",
    "ServiceNotReady",
    "ProducerBlockedQuotaExceededError",
    "ProducerBlockedQuotaExceededException",
    "ChecksumError",
    "UnsupportedVersionError",
    "TopicNotFound",
    "SubscriptionNotFound",
    "ConsumerNotFound",
    "TooManyRequests",
    "TopicTerminatedError",
    "ProducerBusy",
    "InvalidTopicName",
    "IncompatibleSchema",
    "ConsumerAssignError",
    "TransactionCoordinatorNotFound",
    "InvalidTxnStatus",
    "NotAllowedError",
    "TransactionConflict",
    "TransactionNotFound",
    "ProducerFenced",
]


def test_server_error_values():
    assert [(v.name, v.number) for v in pb.ServerError.DESCRIPTOR.values] == [
        (name, number) for number, name in enumerate(SERVER_ERRORS)
    ]
    assert pb.ServerError.Value("TransactionCoordinatorNotFound") == 20
    assert pb.ServerError.Value("InvalidTxnStatus") == 21
    assert pb.ServerError.Value("NotAllowedError") == 22
    assert pb.ServerError.Value("TransactionConflict") == 23
    assert pb.ServerError.Value("TransactionNotFound") == 24
    assert pb.ServerError.Value("ProducerFenced") == 25


def test_marker_type_values():
    assert dict(pb.MarkerType.items()) == {
        "UNKNOWN_MARKER": 0,
        "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST": 10,
        "REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE": 11,
        "REPLICATED_SUBSCRIPTION_SNAPSHOT": 12,
        "REPLICATED_SUBSCRIPTION_UPDATE": 13,
        "TXN_COMMITTING": 20,
        "TXN_COMMIT": 21,
        "TXN_ABORT": 22,
    }


def test_other_enums():
    assert dict(pb.CompressionType.items()) == {
        "NONE": 0,
        "LZ4": 1,
        "ZLIB": 2,
        "ZSTD": 3,
        "SNAPPY": 4,
    }
    assert dict(pb.ProducerAccessMode.items()) == {
        "Shared": 0,
        "Exclusive": 1,
        "WaitForExclusive": 2,
        "ExclusiveWithFencing": 3,
    }
    assert dict(pb.TxnAction.items()) == {"COMMIT": 0, "ABORT": 1}
    assert dict(pb.KeySharedMode.items()) == {"AUTO_SPLIT": 0, "STICKY": 1}
    assert dict(pb.AuthMethod.items()) == {
        "AuthMethodNone": 0,
        "AuthMethodYcaV1": 1,
        "AuthMethodAthens": 2,
    }
    assert dict(pb.ProtocolVersion.items()) == {f"v{i}": i for i in range(22)}
    assert dict(pb.CommandSubscribe.SubType.items()) == {
        "Exclusive": 0,
        "Shared": 1,
        "Failover": 2,
        "Key_Shared": 3,
    }
    assert dict(pb.CommandAck.AckType.items()) == {"Individual": 0, "Cumulative": 1}
    assert pb.Schema.Type.Value("None") == 0
    assert pb.Schema.Type.Value("ProtobufNative") == 20
    assert pb.Schema.Type.Value("AutoConsume") == 21
    assert pb.Schema.Type.Value("External") == 22


def test_feature_flags():
    flags = {fd.name: fd.number for fd in pb.FeatureFlags.DESCRIPTOR.fields}
    assert flags == {
        "supports_auth_refresh": 1,
        "supports_broker_entry_metadata": 2,
        "supports_partial_producer": 3,
        "supports_topic_watchers": 4,
        "supports_get_partitioned_metadata_without_auto_creation": 5,
        "supports_repl_dedup_by_lid_and_eid": 6,
        "supports_topic_watcher_reconcile": 7,
        "supports_scalable_topics": 8,
        "supports_tc_metadata_discovery": 9,
    }
    for fd in pb.FeatureFlags.DESCRIPTOR.fields:
        assert fd.type == FieldDescriptor.TYPE_BOOL
        assert fd.default_value is False


# ---------------------------------------------------------------------------
# (5) Field numbers, types and labels
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message_cls", "field_name", "number", "field_type", "label"),
    [
        (pb.MessageIdData, "ledgerId", 1, FieldDescriptor.TYPE_UINT64, "required"),
        (pb.MessageIdData, "entryId", 2, FieldDescriptor.TYPE_UINT64, "required"),
        (pb.MessageIdData, "ack_set", 5, FieldDescriptor.TYPE_INT64, "repeated"),
        (pb.MessageMetadata, "producer_name", 1, FieldDescriptor.TYPE_STRING, "required"),
        (pb.MessageMetadata, "sequence_id", 2, FieldDescriptor.TYPE_UINT64, "required"),
        (pb.MessageMetadata, "publish_time", 3, FieldDescriptor.TYPE_UINT64, "required"),
        (pb.MessageMetadata, "num_messages_in_batch", 11, FieldDescriptor.TYPE_INT32, "optional"),
        (pb.MessageMetadata, "marker_type", 20, FieldDescriptor.TYPE_INT32, "optional"),
        (pb.MessageMetadata, "txnid_least_bits", 22, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.MessageMetadata, "txnid_most_bits", 23, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.MessageMetadata, "highest_sequence_id", 24, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.MessageMetadata, "chunk_id", 29, FieldDescriptor.TYPE_INT32, "optional"),
        (pb.SingleMessageMetadata, "payload_size", 3, FieldDescriptor.TYPE_INT32, "required"),
        (pb.SingleMessageMetadata, "sequence_id", 8, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.BrokerEntryMetadata, "broker_timestamp", 1, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.BrokerEntryMetadata, "index", 2, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.CommandConnect, "client_version", 1, FieldDescriptor.TYPE_STRING, "required"),
        (pb.CommandConnect, "auth_method_name", 5, FieldDescriptor.TYPE_STRING, "optional"),
        (pb.CommandConnect, "feature_flags", 10, FieldDescriptor.TYPE_MESSAGE, "optional"),
        (pb.CommandSend, "txnid_least_bits", 4, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.CommandSend, "txnid_most_bits", 5, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.CommandAck, "message_id", 3, FieldDescriptor.TYPE_MESSAGE, "repeated"),
        (pb.CommandAck, "txnid_least_bits", 6, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.CommandAck, "txnid_most_bits", 7, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.CommandAck, "request_id", 8, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.CommandAckResponse, "request_id", 6, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.CommandFlow, "messagePermits", 2, FieldDescriptor.TYPE_UINT32, "required"),
        (pb.CommandConsumerStats, "consumer_id", 4, FieldDescriptor.TYPE_UINT64, "required"),
        (pb.CommandLookupTopicResponse, "request_id", 4, FieldDescriptor.TYPE_UINT64, "required"),
        (pb.CommandNewTxn, "request_id", 1, FieldDescriptor.TYPE_UINT64, "required"),
        # Named txn_ttl_seconds before Pulsar 5; same number, same wire value (milliseconds).
        (pb.CommandNewTxn, "txn_ttl_millis", 2, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.CommandNewTxn, "tc_id", 3, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.CommandNewTxnResponse, "txnid_least_bits", 2, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.CommandNewTxnResponse, "txnid_most_bits", 3, FieldDescriptor.TYPE_UINT64, "optional"),
        (pb.CommandNewTxnResponse, "error", 4, FieldDescriptor.TYPE_ENUM, "optional"),
        (pb.CommandAddPartitionToTxn, "partitions", 4, FieldDescriptor.TYPE_STRING, "repeated"),
        (
            pb.CommandAddSubscriptionToTxn,
            "subscription",
            4,
            FieldDescriptor.TYPE_MESSAGE,
            "repeated",
        ),
        (pb.CommandEndTxn, "txn_action", 4, FieldDescriptor.TYPE_ENUM, "optional"),
        (pb.CommandEndTxnOnPartition, "topic", 4, FieldDescriptor.TYPE_STRING, "optional"),
        (pb.CommandEndTxnOnPartition, "txn_action", 5, FieldDescriptor.TYPE_ENUM, "optional"),
        (
            pb.CommandEndTxnOnPartition,
            "txnid_least_bits_of_low_watermark",
            6,
            FieldDescriptor.TYPE_UINT64,
            "optional",
        ),
        (
            pb.CommandEndTxnOnSubscription,
            "subscription",
            4,
            FieldDescriptor.TYPE_MESSAGE,
            "optional",
        ),
        (pb.CommandTcClientConnectRequest, "tc_id", 2, FieldDescriptor.TYPE_UINT64, "required"),
        (pb.CommandProducer, "txn_enabled", 12, FieldDescriptor.TYPE_BOOL, "optional"),
        (pb.CommandSubscribe, "initialPosition", 13, FieldDescriptor.TYPE_ENUM, "optional"),
        (pb.CommandSubscribe, "keySharedMeta", 17, FieldDescriptor.TYPE_MESSAGE, "optional"),
        (pb.KeySharedMeta, "hashRanges", 3, FieldDescriptor.TYPE_MESSAGE, "repeated"),
        (pb.Schema, "schema_data", 3, FieldDescriptor.TYPE_BYTES, "required"),
        (pb.Schema, "type", 4, FieldDescriptor.TYPE_ENUM, "required"),
    ],
)
def test_field_facts(message_cls, field_name, number, field_type, label):
    fd = _field(message_cls, field_name)
    assert fd.number == number
    assert fd.type == field_type
    assert _label(fd) == label


def test_single_message_metadata_payload_size_is_required():
    smm = pb.SingleMessageMetadata()
    assert not smm.IsInitialized()
    smm.payload_size = 3
    assert smm.IsInitialized()
    assert _label(_field(pb.SingleMessageMetadata, "payload_size")) == "required"
    assert _label(_field(pb.SingleMessageMetadata, "properties")) == "repeated"


def test_txn_ids_round_trip_in_message_metadata():
    md = pb.MessageMetadata(
        producer_name="p",
        sequence_id=7,
        publish_time=1,
        txnid_least_bits=0x1234,
        txnid_most_bits=0x5,
        marker_type=pb.TXN_COMMIT,
    )
    decoded = pb.MessageMetadata.FromString(md.SerializeToString())
    assert decoded.txnid_least_bits == 0x1234
    assert decoded.txnid_most_bits == 0x5
    assert decoded.marker_type == 21
