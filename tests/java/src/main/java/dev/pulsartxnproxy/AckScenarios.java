package dev.pulsartxnproxy;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;

/**
 * Transactional acknowledgement scenarios: cumulative and individual acks inside batches, aborts, second
 * transactions over the same messages, redelivery (on request and on reconnect) and redelivery counts. Each records
 * what the client observes (payload, position with batch index, redelivery count, in arrival order); none asserts.
 * All run on partition 0 of the given topic with batch-index acknowledgement on the consumer.
 */
final class AckScenarios {

    private static final long WAIT_SECONDS = 15;
    private static final long TXN_SECONDS = 60;
    /** "Nothing more arrives": no message within this window. */
    private static final long QUIET_MS = 1000;
    /** How long a new consumer waits for its first message. */
    private static final long SUBSCRIBE_MS = 3000;

    private final PulsarClient client;
    private final Map<String, Object> obs;
    private final List<Supplier<CompletableFuture<Void>>> closers;

    @FunctionalInterface
    interface Step {
        void run() throws Exception;
    }

    AckScenarios(PulsarClient client, Map<String, Object> obs, List<Supplier<CompletableFuture<Void>>> closers) {
        this.client = client;
        this.obs = obs;
        this.closers = closers;
    }

    /**
     * {@code ack_batch_cumulative <topic> <index> <commit|abort>}: b-0..b-12 are published as batches of 5, 5 and 3
     * and received by an Exclusive consumer; b-{@code index} is acknowledged cumulatively in txn1, which then ends.
     * Recorded: what arrives while txn1 is open, also after redeliverUnacknowledgedMessages (a pending cumulative ack
     * does not hide messages from a rewind), and after txn1 ended, after redeliverUnacknowledgedMessages, and, after
     * an abort, what a second transaction acknowledging the same message cumulatively and committing leaves; last,
     * what a new consumer of the subscription gets.
     */
    void batchCumulative(String topic, int index, boolean commit) throws Exception {
        String partition = topic + "-partition-0";
        Producer<byte[]> producer = batchingProducer(partition);
        sendAll(producer, "b-", 13);
        Consumer<byte[]> consumer = consumer(partition, SubscriptionType.Exclusive);
        List<Message<byte[]>> received = Scenarios.receive(consumer, 13, Scenarios.SETTLE_MS);
        obs.put("received", deliveries(received));
        if (received.size() != 13) {
            return;
        }
        MessageId acked = received.get(index).getMessageId();
        Transaction txn1 = newTxn();
        obs.put("txn1_ack_error", outcome(() -> consumer.acknowledgeCumulativeAsync(acked, txn1)
                .get(WAIT_SECONDS, SECONDS)));
        obs.put("while_open", deliveries(drain(consumer, 500)));
        consumer.redeliverUnacknowledgedMessages();
        obs.put("redelivered_while_open", deliveries(drain(consumer, QUIET_MS)));
        obs.put("end_error", outcome(() -> end(txn1, commit)));
        obs.put("after_end", deliveries(drain(consumer, QUIET_MS)));
        consumer.redeliverUnacknowledgedMessages();
        List<Message<byte[]>> again = drain(consumer, QUIET_MS);
        obs.put("after_redeliver", deliveries(again));
        if (!commit) {
            Message<byte[]> same = find(again, Scenarios.text(received.get(index)));
            if (same != null) {
                Transaction txn2 = newTxn();
                obs.put("txn2_ack_error", outcome(() -> consumer.acknowledgeCumulativeAsync(same.getMessageId(), txn2)
                        .get(WAIT_SECONDS, SECONDS)));
                obs.put("txn2_commit_error", outcome(() -> txn2.commit().get(WAIT_SECONDS, SECONDS)));
                obs.put("after_second_commit", deliveries(drain(consumer, 500)));
            }
        }
        consumer.close();
        Consumer<byte[]> again2 = consumer(partition, SubscriptionType.Exclusive);
        obs.put("after_reconnect", deliveries(drain(again2, SUBSCRIBE_MS, QUIET_MS)));
    }

    /**
     * {@code ack_cumulative_open <topic> <index>}: as {@code ack_batch_cumulative} up to the cumulative ack of
     * b-{@code index} in a transaction, which is left open (its id is recorded) for the admin API to be asked about.
     */
    void cumulativeOpen(String topic, int index) throws Exception {
        String partition = topic + "-partition-0";
        Producer<byte[]> producer = batchingProducer(partition);
        sendAll(producer, "b-", 13);
        Consumer<byte[]> consumer = consumer(partition, SubscriptionType.Exclusive);
        List<Message<byte[]>> received = Scenarios.receive(consumer, 13, Scenarios.SETTLE_MS);
        obs.put("received", deliveries(received));
        if (received.size() != 13) {
            return;
        }
        Transaction txn = newTxn();
        obs.put("txn_id", txn.getTxnID().getMostSigBits() + ":" + txn.getTxnID().getLeastSigBits());
        obs.put("txn_ack_error", outcome(() -> consumer.acknowledgeCumulativeAsync(received.get(index).getMessageId(),
                txn).get(WAIT_SECONDS, SECONDS)));
    }

    /**
     * {@code ack_batch_individual <topic> <subType> <commit|abort>}: i-0..i-9 are published as two batches of 5 and
     * received; i-0 is acknowledged plainly; txn1 acknowledges i-1, i-3, i-5, i-6, i-8 and i-9 (batch indexes of
     * both batches) and ends. Recorded: what arrives while txn1 is open, after it ended, after
     * redeliverUnacknowledgedMessages and after a reconnect; then a second transaction acknowledges everything the
     * reconnected consumer got and commits, and a last consumer gets what is left.
     */
    void batchIndividual(String topic, SubscriptionType type, boolean commit) throws Exception {
        String partition = topic + "-partition-0";
        obs.put("subscription_type", type.name());
        Producer<byte[]> producer = batchingProducer(partition);
        sendAll(producer, "i-", 10);
        Consumer<byte[]> consumer = consumer(partition, type);
        List<Message<byte[]>> received = Scenarios.receive(consumer, 10, Scenarios.SETTLE_MS);
        obs.put("received", deliveries(received));
        if (received.size() != 10) {
            return;
        }
        obs.put("plain_ack_error", outcome(() -> consumer.acknowledgeAsync(received.get(0).getMessageId())
                .get(WAIT_SECONDS, SECONDS)));
        Transaction txn1 = newTxn();
        List<Object> ackErrors = new ArrayList<>();
        for (int i : new int[] {1, 3, 5, 6, 8, 9}) {
            MessageId id = received.get(i).getMessageId();
            ackErrors.add(outcome(() -> consumer.acknowledgeAsync(id, txn1).get(WAIT_SECONDS, SECONDS)));
        }
        obs.put("txn1_ack_errors", ackErrors);
        obs.put("while_open", deliveries(drain(consumer, 500)));
        obs.put("end_error", outcome(() -> end(txn1, commit)));
        obs.put("after_end", deliveries(drain(consumer, QUIET_MS)));
        consumer.redeliverUnacknowledgedMessages();
        obs.put("after_redeliver", deliveries(drain(consumer, QUIET_MS)));
        consumer.close();
        Consumer<byte[]> reconnected = consumer(partition, type);
        List<Message<byte[]>> left = drain(reconnected, SUBSCRIBE_MS, QUIET_MS);
        obs.put("after_reconnect", deliveries(left));
        Transaction txn2 = newTxn();
        List<Object> txn2Errors = new ArrayList<>();
        for (Message<byte[]> msg : left) {
            txn2Errors.add(outcome(() -> reconnected.acknowledgeAsync(msg.getMessageId(), txn2)
                    .get(WAIT_SECONDS, SECONDS)));
        }
        obs.put("txn2_ack_errors", txn2Errors);
        obs.put("txn2_commit_error", outcome(() -> txn2.commit().get(WAIT_SECONDS, SECONDS)));
        reconnected.close();
        obs.put("at_end", deliveries(drain(consumer(partition, type), SUBSCRIBE_MS, QUIET_MS)));
    }

    /**
     * {@code ack_two_aborts <topic> <subType> [batched] [cumulative]}: f-0..f-3 are published (as one batch with
     * {@code batched}) and received. Individual acks: txn1 acknowledges f-0, txn2 f-1, then both abort, one after
     * the other. Cumulative acks (Exclusive, Failover): txn1 acknowledges up to f-0 and aborts, then txn2 up to f-1
     * and aborts. Recorded: what arrives after each abort, after redeliverUnacknowledgedMessages and after a
     * reconnect; then txn3 acknowledges the newest delivery of each message and commits, and a last consumer gets
     * what is left.
     */
    void twoAborts(String topic, SubscriptionType type, boolean batched, boolean cumulative) throws Exception {
        String partition = topic + "-partition-0";
        obs.put("subscription_type", type.name());
        obs.put("batched", batched);
        obs.put("cumulative", cumulative);
        Producer<byte[]> producer = batched ? batchingProducer(partition) : plainProducer(partition);
        sendAll(producer, "f-", 4);
        Consumer<byte[]> consumer = consumer(partition, type);
        List<Message<byte[]>> received = Scenarios.receive(consumer, 4, Scenarios.SETTLE_MS);
        obs.put("received", deliveries(received));
        if (received.size() != 4) {
            return;
        }
        Transaction txn1 = newTxn();
        Transaction txn2 = newTxn();
        obs.put("txn1_ack_error", outcome(() -> ack(consumer, received.get(0), txn1, cumulative)));
        if (cumulative) {
            obs.put("txn1_abort_error", outcome(() -> txn1.abort().get(WAIT_SECONDS, SECONDS)));
            obs.put("after_first_abort", deliveries(drain(consumer, QUIET_MS)));
        }
        obs.put("txn2_ack_error", outcome(() -> ack(consumer, received.get(1), txn2, cumulative)));
        if (!cumulative) {
            obs.put("txn1_abort_error", outcome(() -> txn1.abort().get(WAIT_SECONDS, SECONDS)));
            obs.put("after_first_abort", deliveries(drain(consumer, QUIET_MS)));
        }
        obs.put("txn2_abort_error", outcome(() -> txn2.abort().get(WAIT_SECONDS, SECONDS)));
        obs.put("after_second_abort", deliveries(drain(consumer, QUIET_MS)));
        consumer.redeliverUnacknowledgedMessages();
        obs.put("after_redeliver", deliveries(drain(consumer, QUIET_MS)));
        consumer.close();
        Consumer<byte[]> reconnected = consumer(partition, type);
        List<Message<byte[]>> left = drain(reconnected, SUBSCRIBE_MS, QUIET_MS);
        obs.put("after_reconnect", deliveries(left));
        Map<String, Message<byte[]>> newest = new LinkedHashMap<>();
        for (Message<byte[]> msg : left) {
            newest.put(Scenarios.text(msg), msg);
        }
        Transaction txn3 = newTxn();
        List<Object> txn3Errors = new ArrayList<>();
        for (Message<byte[]> msg : newest.values()) {
            txn3Errors.add(outcome(() -> reconnected.acknowledgeAsync(msg.getMessageId(), txn3)
                    .get(WAIT_SECONDS, SECONDS)));
        }
        obs.put("txn3_ack_errors", txn3Errors);
        obs.put("txn3_commit_error", outcome(() -> txn3.commit().get(WAIT_SECONDS, SECONDS)));
        reconnected.close();
        obs.put("at_end", deliveries(drain(consumer(partition, type), SUBSCRIBE_MS, QUIET_MS)));
    }

    // ---------------------------------------------------------------- helpers

    private static void ack(Consumer<byte[]> consumer, Message<byte[]> msg, Transaction txn, boolean cumulative)
            throws Exception {
        MessageId id = msg.getMessageId();
        (cumulative ? consumer.acknowledgeCumulativeAsync(id, txn) : consumer.acknowledgeAsync(id, txn))
                .get(WAIT_SECONDS, SECONDS);
    }

    private void end(Transaction txn, boolean commit) throws Exception {
        (commit ? txn.commit() : txn.abort()).get(WAIT_SECONDS, SECONDS);
    }

    private Transaction newTxn() throws Exception {
        return client.newTransaction().withTransactionTimeout(TXN_SECONDS, SECONDS).build().get(WAIT_SECONDS, SECONDS);
    }

    /** Batches of at most 5 messages, sent when full (or after a second). */
    private Producer<byte[]> batchingProducer(String topic) throws PulsarClientException {
        Producer<byte[]> producer = client.newProducer()
                .topic(topic)
                .sendTimeout(0, SECONDS)
                .enableBatching(true)
                .batchingMaxMessages(5)
                .batchingMaxPublishDelay(1, SECONDS)
                .create();
        closers.add(producer::closeAsync);
        return producer;
    }

    private Producer<byte[]> plainProducer(String topic) throws PulsarClientException {
        Producer<byte[]> producer = client.newProducer().topic(topic).sendTimeout(0, SECONDS)
                .enableBatching(false).create();
        closers.add(producer::closeAsync);
        return producer;
    }

    /** A consumer of subscription sub with batch-index acknowledgement and ack receipts. */
    private Consumer<byte[]> consumer(String topic, SubscriptionType type) throws PulsarClientException {
        Consumer<byte[]> consumer = client.newConsumer()
                .topic(topic)
                .subscriptionName("sub")
                .subscriptionType(type)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .enableBatchIndexAcknowledgment(true)
                .acknowledgmentGroupTime(0, MILLISECONDS)
                .isAckReceiptEnabled(true)
                .subscribe();
        closers.add(consumer::closeAsync);
        return consumer;
    }

    /** Sends {@code prefix}0..{@code count-1} asynchronously, then waits for every receipt. */
    private static void sendAll(Producer<byte[]> producer, String prefix, int count) throws Exception {
        List<CompletableFuture<MessageId>> sends = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            sends.add(producer.newMessage().value((prefix + i).getBytes(UTF_8)).sendAsync());
        }
        producer.flush();
        for (CompletableFuture<MessageId> send : sends) {
            send.get(WAIT_SECONDS, SECONDS);
        }
    }


    /** Everything that arrives until {@code quietMs} pass without a message (at most 100). */
    private static List<Message<byte[]>> drain(Consumer<byte[]> consumer, long quietMs)
            throws PulsarClientException {
        return drain(consumer, quietMs, quietMs);
    }

    /**
     * As {@link #drain(Consumer, long)}, waiting {@code firstMs} for the first message: a new consumer (Pulsar
     * delays the first read of a new active Failover consumer by activeConsumerFailoverDelayTimeMillis, 1 s).
     */
    private static List<Message<byte[]>> drain(Consumer<byte[]> consumer, long firstMs, long quietMs)
            throws PulsarClientException {
        List<Message<byte[]>> received = new ArrayList<>();
        while (received.size() < 100) {
            long wait = received.isEmpty() ? firstMs : quietMs;
            Message<byte[]> msg = consumer.receive((int) wait, MILLISECONDS);
            if (msg == null) {
                break;
            }
            received.add(msg);
        }
        return received;
    }

    private static Message<byte[]> find(List<Message<byte[]>> messages, String payload) {
        for (Message<byte[]> msg : messages) {
            if (Scenarios.text(msg).equals(payload)) {
                return msg;
            }
        }
        return null;
    }


    /** Payload, position ({@code ledger:entry[:batchIndex]}) and redelivery count of each message, in order. */
    private static List<Map<String, Object>> deliveries(List<Message<byte[]>> messages) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Message<byte[]> msg : messages) {
            Map<String, Object> d = new LinkedHashMap<>();
            d.put("payload", Scenarios.text(msg));
            d.put("at", position(msg.getMessageId()));
            d.put("redelivery_count", msg.getRedeliveryCount());
            out.add(d);
        }
        return out;
    }

    private static String position(MessageId messageId) {
        if (messageId instanceof MessageIdAdv adv) {
            String at = adv.getLedgerId() + ":" + adv.getEntryId();
            return adv.getBatchIndex() >= 0 ? at + ":" + adv.getBatchIndex() : at;
        }
        return messageId.toString();
    }

    /** Null when the step succeeded, else the description of its exception. */
    private static Map<String, Object> outcome(Step step) {
        try {
            step.run();
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Scenarios.describe(e);
        } catch (Exception e) {
            return Scenarios.describe(e);
        }
    }
}
