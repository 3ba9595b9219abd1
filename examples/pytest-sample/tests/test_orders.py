"""Producing and consuming with the official client: a round trip, keys and properties, a shared subscription."""

import pulsar


def test_round_trip(pulsar_client, pulsar_namespace):
    topic = pulsar_namespace.topic("orders")
    consumer = pulsar_client.subscribe(topic, "billing")
    producer = pulsar_client.create_producer(topic)

    producer.send(b"order-1", partition_key="customer-7", properties={"currency": "EUR"})

    msg = consumer.receive(timeout_millis=5000)
    assert msg.data() == b"order-1"
    assert msg.partition_key() == "customer-7"
    assert msg.properties() == {"currency": "EUR"}
    consumer.acknowledge(msg)


def test_each_subscription_gets_every_message(pulsar_client, pulsar_namespace):
    topic = pulsar_namespace.topic("events")
    billing = pulsar_client.subscribe(topic, "billing")
    audit = pulsar_client.subscribe(topic, "audit")
    producer = pulsar_client.create_producer(topic)
    for i in range(10):
        producer.send(f"event-{i}".encode())

    for consumer in (billing, audit):
        got = [consumer.receive(timeout_millis=5000).data() for _ in range(10)]
        assert got == [f"event-{i}".encode() for i in range(10)]


def test_shared_subscription_spreads_and_redelivers(pulsar_client, pulsar_namespace):
    topic = pulsar_namespace.topic("jobs")
    workers = [
        pulsar_client.subscribe(
            topic,
            "workers",
            consumer_type=pulsar.ConsumerType.Shared,
            receiver_queue_size=1,
            negative_ack_redelivery_delay_ms=100,
        )
        for _ in range(2)
    ]
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    for i in range(6):
        producer.send(f"job-{i}".encode())

    first = workers[0].receive(timeout_millis=5000)
    workers[0].negative_acknowledge(first)  # handed out again, to either worker
    done = set()
    while len(done) < 6:
        for worker in workers:
            try:
                msg = worker.receive(timeout_millis=200)
            except pulsar.Timeout:
                continue
            worker.acknowledge(msg)
            done.add(msg.data())
    assert done == {f"job-{i}".encode() for i in range(6)}
