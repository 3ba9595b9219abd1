package dev.pulsartxnproxy;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.impl.ConsumerImpl;

/**
 * Flow control over batches of which some messages are acknowledged already.
 *
 * <p>The Java client skips the messages a MESSAGE's ack set marks as acknowledged without giving their permits
 * back: the broker must not count them against the consumer's permits. A consumer with a small receiver queue that
 * reconnects to a batch acknowledged but for its tail must then get the tail and everything after it.
 */
final class PermitScenarios {

    private static final int BATCH = 100;
    private static final int TAIL = 5;
    private static final int AFTER = 20;
    private static final int QUEUE = 10;
    private static final long QUIET_MS = 2000;

    private final PulsarClient client;
    private final Map<String, Object> obs;
    private SubscriptionType type = SubscriptionType.Failover;

    PermitScenarios(PulsarClient client, Map<String, Object> obs) {
        this.client = client;
        this.obs = obs;
    }

    /**
     * {@code partial_batch_permits <topic> [txn] [Shared]}: one batch of 100 messages, then 20 single ones. A
     * Failover (or Shared) consumer acknowledges the first 95 of the batch (batch-index acks; with {@code txn}, in a
     * transaction that commits) and closes; a consumer with a receiver queue of 10 then subscribes again and receives
     * until quiet.
     */
    void partialBatchPermits(String topic, boolean transactional, SubscriptionType type) throws Exception {
        this.type = type;
        try (Producer<byte[]> batched = client.newProducer().topic(topic).sendTimeout(0, SECONDS)
                .enableBatching(true).batchingMaxMessages(BATCH).batchingMaxPublishDelay(10, SECONDS).create()) {
            for (int i = 0; i < BATCH; i++) {
                batched.sendAsync(("b-" + i).getBytes(UTF_8));
            }
            batched.flush();
        }
        try (Producer<byte[]> single = client.newProducer().topic(topic).enableBatching(false).create()) {
            for (int i = 0; i < AFTER; i++) {
                single.send(("p-" + i).getBytes(UTF_8));
            }
        }
        try (Consumer<byte[]> first = consumer(topic, 1000)) {
            Transaction txn = transactional
                    ? client.newTransaction().withTransactionTimeout(60, SECONDS).build().get(15, SECONDS) : null;
            List<String> acked = new ArrayList<>();
            for (int i = 0; i < BATCH - TAIL; i++) {
                Message<byte[]> msg = first.receive(10, SECONDS);
                if (msg == null) {
                    break;
                }
                acked.add(new String(msg.getValue(), UTF_8));
                if (txn != null) {
                    first.acknowledgeAsync(msg.getMessageId(), txn).get(15, SECONDS);
                } else {
                    first.acknowledge(msg);
                }
            }
            if (txn != null) {
                txn.commit().get(15, SECONDS);
            }
            obs.put("acked", acked.size());
        }
        try (Consumer<byte[]> again = consumer(topic, QUEUE)) {
            List<String> received = new ArrayList<>();
            while (true) {
                Message<byte[]> msg = again.receive((int) QUIET_MS, MILLISECONDS);
                if (msg == null) {
                    break;
                }
                received.add(new String(msg.getValue(), UTF_8));
                again.acknowledge(msg);
            }
            obs.put("after_resubscribe", received);
            obs.put("available_permits", again instanceof ConsumerImpl<byte[]> impl ? impl.getAvailablePermits() : -1);
        }
    }

    private Consumer<byte[]> consumer(String topic, int queue) throws PulsarClientException {
        return client.newConsumer()
                .topic(topic)
                .subscriptionName("sub")
                .subscriptionType(type)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .enableBatchIndexAcknowledgment(true)
                .acknowledgmentGroupTime(0, MILLISECONDS)
                .isAckReceiptEnabled(true)
                .receiverQueueSize(queue)
                .subscribe();
    }
}
