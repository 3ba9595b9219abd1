"""A partitioned topic: messages with the same key stay in one partition, a consumer reads them all."""

import pulsar


def test_keys_stay_in_their_partition(pulsar_client, pulsar_namespace):
    topic = pulsar_namespace.create_partitioned_topic("payments", partitions=3)
    assert len(pulsar_client.get_topic_partitions(topic)) == 3

    consumer = pulsar_client.subscribe(topic, "ledger", initial_position=pulsar.InitialPosition.Earliest)
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    partition_of = {}
    for i in range(30):
        key = f"account-{i % 5}"
        msg_id = producer.send(f"payment-{i}".encode(), partition_key=key)
        assert partition_of.setdefault(key, msg_id.partition()) == msg_id.partition()

    got = [consumer.receive(timeout_millis=5000) for _ in range(30)]
    assert sorted(m.data() for m in got) == sorted(f"payment-{i}".encode() for i in range(30))
    per_key = {}
    for m in got:  # within a key (one partition), order is kept
        per_key.setdefault(m.partition_key(), []).append(int(m.data().split(b"-")[1]))
    assert all(values == sorted(values) for values in per_key.values())
