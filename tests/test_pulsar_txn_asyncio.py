"""pulsar_txn.asyncio (shaped like pulsar.asyncio) through the real path; an official client observes."""

from __future__ import annotations

import asyncio
import uuid

import pulsar
import pytest

import pulsar_txn
import pulsar_txn.asyncio as pulsar_asyncio


def _topic() -> str:
    return f"persistent://public/default/ptx-async-{uuid.uuid4().hex[:10]}"


def test_produce_consume_and_transactions(server, client) -> None:
    topic, out = _topic(), _topic()
    observer = client.subscribe(out, "observer")

    async def main() -> list[bytes]:
        aclient = pulsar_asyncio.Client(server.url, operation_timeout_seconds=10)
        consumer = await aclient.subscribe(topic, "s", initial_position=pulsar_txn.InitialPosition.Earliest)
        producer = await aclient.create_producer(topic, batching_enabled=True)
        ids = await asyncio.gather(*(producer.send(f"m{i}".encode(), partition_key="k") for i in range(20)))
        assert len({str(i) for i in ids}) == 20
        sink = await aclient.create_producer(out)
        seen = []
        for i in range(20):
            msg = await consumer.receive()
            seen.append(msg.data())
            async with await aclient.new_transaction() as txn:
                await sink.send(msg.data().upper(), txn=txn)
                await consumer.acknowledge(msg, txn=txn)
            if i == 0:
                with pytest.raises(RuntimeError):
                    async with await aclient.new_transaction() as failed:
                        await sink.send(b"dropped", txn=failed)
                        raise RuntimeError("boom")
                assert failed.state is pulsar_txn.TxnState.ABORTED
        waiting = asyncio.ensure_future(consumer.receive())
        await asyncio.sleep(0.2)
        waiting.cancel()  # a cancelled receive takes nothing
        await (await aclient.create_producer(topic)).send(b"after-cancel")
        assert (await consumer.receive()).data() == b"after-cancel"
        await aclient.close()
        return seen

    seen = asyncio.run(main())
    assert seen == [f"m{i}".encode() for i in range(20)]
    got = []
    while True:
        try:
            got.append(observer.receive(1000).data())
        except pulsar.Timeout:
            break
    assert got == [f"M{i}".encode() for i in range(20)]


def test_errors_are_pulsar_exceptions_with_results(server) -> None:
    async def main() -> None:
        aclient = pulsar_asyncio.Client(server.url, operation_timeout_seconds=10)
        topic = _topic()
        await aclient.subscribe(topic, "s")
        with pytest.raises(pulsar_asyncio.PulsarException) as caught:
            await aclient.subscribe(topic, "s")
        assert caught.value.error() == pulsar_txn.Result.ConsumerBusy
        await aclient.close()

    asyncio.run(main())
