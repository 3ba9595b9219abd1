"""Pulsar with transactions for Python: the API of ``pulsar-client`` 3.x (switch with ``import pulsar_txn as
pulsar``), plus transactions shaped as the Java client's::

    import pulsar_txn as pulsar

    client = pulsar.Client("pulsar://localhost:6650")
    producer = client.create_producer("out")
    consumer = client.subscribe("in", "my-sub", initial_position=pulsar.InitialPosition.Earliest)
    msg = consumer.receive()
    with client.new_transaction(timeout_ms=60_000) as txn:   # commits at the end, aborts on an exception
        producer.send(msg.data().upper(), txn=txn)
        consumer.acknowledge(msg, txn=txn)
    client.close()

Pure Python on the project's ``wire`` codec: a sans-I/O core (:mod:`pulsar_txn.core`), this blocking shell and an
asyncio shell (:mod:`pulsar_txn.asyncio`).
"""

from pulsar_txn import schema
from pulsar_txn.authentication import Authentication, AuthenticationBasic, AuthenticationTLS, AuthenticationToken
from pulsar_txn.client import (
    BatchReceivePolicy,
    Client,
    Consumer,
    ConsumerBatchReceivePolicy,
    ConsumerKeySharedPolicy,
    Producer,
    Reader,
    Transaction,
)
from pulsar_txn.core.transaction import TxnId, TxnState
from pulsar_txn.enums import (
    BatchingType,
    CompressionType,
    ConsumerCryptoFailureAction,
    ConsumerType,
    InitialPosition,
    KeySharedMode,
    LoggerLevel,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    Result,
)
from pulsar_txn.exceptions import *  # noqa: F403 (the official client exports every exception at the top level)
from pulsar_txn.exceptions import PulsarException
from pulsar_txn.message import Message, MessageId
from pulsar_txn.schema import BytesSchema

__version__ = "0.1.0"

__all__ = [
    "Authentication",
    "AuthenticationBasic",
    "AuthenticationTLS",
    "AuthenticationToken",
    "BatchReceivePolicy",
    "BatchingType",
    "BytesSchema",
    "Client",
    "CompressionType",
    "Consumer",
    "ConsumerBatchReceivePolicy",
    "ConsumerCryptoFailureAction",
    "ConsumerKeySharedPolicy",
    "ConsumerType",
    "InitialPosition",
    "KeySharedMode",
    "LoggerLevel",
    "Message",
    "MessageId",
    "PartitionsRoutingMode",
    "Producer",
    "ProducerAccessMode",
    "PulsarException",
    "Reader",
    "RegexSubscriptionMode",
    "Result",
    "Transaction",
    "TxnId",
    "TxnState",
    "schema",
]
