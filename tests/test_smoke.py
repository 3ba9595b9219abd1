"""The basic path: produce, consume and acknowledge with the official client."""

import pulsar


def test_produce_then_consume_in_order(client: pulsar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching_enabled=False)
    sent = [producer.send(f"m{i}".encode()) for i in range(5)]
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    for i in range(5):
        msg = consumer.receive(5000)
        assert msg.data() == f"m{i}".encode()
        assert msg.message_id() == sent[i]
        consumer.acknowledge(msg)
    assert [m.entry_id() for m in sent] == list(range(5))
