package dev.pulsartxnproxy;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.function.Supplier;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.TypedMessageBuilder;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.client.impl.PulsarClientImpl;
import org.apache.pulsar.client.impl.transaction.TransactionCoordinatorClientImpl;

/**
 * The transaction scenarios. Each one records what the client observed (payloads in arrival order, exceptions,
 * redelivery counts, transaction ids) into {@code obs}; none of them asserts. Client calls that fail as part of the
 * scenario's subject (commit, abort, transactional ack) are recorded; failures of the setup (subscribe, create a
 * producer, open a transaction, send) propagate and become the harness error.
 */
final class Scenarios {

    static final List<String> NAMES = List.of(
            "commit_atomic", "abort_invisible", "read_committed_order", "interleaved_txns",
            "consume_process_produce", "consume_process_produce_abort", "txn_ack_then_abort",
            "commit_after_abort", "ack_conflict", "txn_timeout", "crash_prepare", "commit_and_verify",
            "crash_verify");

    /** Bound on any single client future, so that a server that never answers cannot hang the harness. */
    private static final long WAIT_SECONDS = 15;
    /** Timeout of transactions that must stay open for the whole scenario. */
    private static final long LONG_TXN_SECONDS = 60;
    /** The window of "receives nothing within 1 s" checks. */
    private static final long QUIET_MS = 1000;
    /** After the expected messages arrived: how long to look for extra ones (duplicates, leaks). */
    private static final long EXTRA_MS = 300;

    private final PulsarClient client;
    private final Map<String, Object> obs;
    /** Close futures of every producer and consumer created, run by {@link #closeAll()}. */
    private final List<Supplier<CompletableFuture<Void>>> closers = new ArrayList<>();

    /** A step whose failure is an observation. */
    @FunctionalInterface
    interface Step {
        void run() throws Exception;
    }

    Scenarios(PulsarClient client, Map<String, Object> obs) {
        this.client = client;
        this.obs = obs;
    }

    /** The client every scenario uses; building it connects to the transaction coordinators. */
    static PulsarClient newClient(String url) throws PulsarClientException {
        return PulsarClient.builder()
                .serviceUrl(url)
                .enableTransaction(true)
                .operationTimeout(10, SECONDS)
                .build();
    }

    void run(String name, List<String> args) throws Exception {
        switch (name) {
            case "commit_atomic" -> produceThenEnd(arg(args, 0), arg(args, 1), true, flag(args, 2, "batched"));
            case "abort_invisible" -> produceThenEnd(arg(args, 0), arg(args, 1), false, flag(args, 2, "batched"));
            case "read_committed_order" -> readCommittedOrder(arg(args, 0));
            case "interleaved_txns" -> interleavedTxns(arg(args, 0));
            case "consume_process_produce" ->
                    consumeProcessProduce(arg(args, 0), arg(args, 1), true, subType(args, 2, "Exclusive"));
            case "consume_process_produce_abort" ->
                    consumeProcessProduce(arg(args, 0), arg(args, 1), false, subType(args, 2, "Shared"));
            case "txn_ack_then_abort" -> txnAckThenAbort(arg(args, 0), subType(args, 1, "Shared"));
            case "commit_after_abort" -> commitAfterAbort(arg(args, 0));
            case "ack_conflict" -> ackConflict(arg(args, 0));
            case "txn_timeout" -> txnTimeout(arg(args, 0), arg(args, 1));
            case "crash_prepare" -> crashPrepare(arg(args, 0), Long.parseLong(arg(args, 1)));
            case "commit_and_verify" -> commitAndVerify(arg(args, 0));
            case "crash_verify" -> crashVerify(arg(args, 0), arg(args, 1), Long.parseLong(arg(args, 2)),
                    Integer.parseInt(arg(args, 3)));
            default -> throw new IllegalArgumentException("unknown scenario " + name);
        }
    }

    // ---------------------------------------------------------------- scenarios

    /**
     * {@code commit_atomic} / {@code abort_invisible}: one txn sends 10 messages to topic A and 5 to topic B. A
     * consumer on both (subscribed first, Earliest) must see nothing before the end; after commit all 15, after
     * abort none, and then plain messages sent afterwards (one per partition) must still flow.
     */
    private void produceThenEnd(String topicA, String topicB, boolean commit, boolean batched) throws Exception {
        obs.put("batched", batched);
        Consumer<byte[]> consumer = consumer("sub", SubscriptionType.Exclusive, topicA, topicB);
        Producer<byte[]> producerA = producer(topicA, batched);
        Producer<byte[]> producerB = producer(topicB, batched);
        Transaction txn = newTxn(LONG_TXN_SECONDS);
        obs.put("txn_id", id(txn));
        List<CompletableFuture<MessageId>> sends = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            sends.add(message(producerA, txn, "a-" + i).sendAsync());
        }
        for (int i = 0; i < 5; i++) {
            sends.add(message(producerB, txn, "b-" + i).sendAsync());
        }
        producerA.flush();
        producerB.flush();
        for (CompletableFuture<MessageId> send : sends) {
            send.get(WAIT_SECONDS, SECONDS);
        }
        obs.put("before_end", texts(within(consumer, QUIET_MS)));
        if (commit) {
            obs.put("commit_error", outcome(() -> txn.commit().get(WAIT_SECONDS, SECONDS)));
            obs.put("txn_state", txn.getState().name());
            obs.put("after_commit", texts(receive(consumer, 15, 10_000)));
            obs.put("extra", texts(within(consumer, EXTRA_MS)));
        } else {
            obs.put("abort_error", outcome(() -> txn.abort().get(WAIT_SECONDS, SECONDS)));
            obs.put("txn_state", txn.getState().name());
            obs.put("after_abort", texts(within(consumer, 2000)));
            // Round-robin routing without batching: three plain messages reach all three partitions.
            Producer<byte[]> plainA = producer(topicA, false);
            Producer<byte[]> plainB = producer(topicB, false);
            for (int i = 0; i < 3; i++) {
                send(plainA, null, "plain-a-" + i);
                send(plainB, null, "plain-b-" + i);
            }
            obs.put("plain_after_abort", texts(receive(consumer, 6, 10_000)));
        }
    }

    /**
     * {@code read_committed_order}: on one partition, txn T sends t1, then a plain producer sends p1, p2. Plain
     * messages wait behind the open txn (the broker's max read position); after commit: t1, p1, p2.
     */
    private void readCommittedOrder(String topic) throws Exception {
        String partition = topic + "-partition-0";
        obs.put("topic", partition);
        Consumer<byte[]> consumer = consumer("sub", SubscriptionType.Exclusive, partition);
        Producer<byte[]> txnProducer = producer(partition, false);
        Producer<byte[]> plainProducer = producer(partition, false);
        Transaction txn = newTxn(LONG_TXN_SECONDS);
        obs.put("txn_id", id(txn));
        send(txnProducer, txn, "t1");
        send(plainProducer, null, "p1");
        send(plainProducer, null, "p2");
        obs.put("before_commit", texts(within(consumer, QUIET_MS)));
        obs.put("commit_error", outcome(() -> txn.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("after_commit", texts(receive(consumer, 3, 10_000)));
        obs.put("extra", texts(within(consumer, EXTRA_MS)));
    }

    /**
     * {@code interleaved_txns}: on one partition, T1 sends a1, T2 sends b1, a plain producer sends p1. T2 commits
     * while T1 is open: nothing is readable yet (T1's first message bounds the read position). T1 aborts: b1, p1.
     */
    private void interleavedTxns(String topic) throws Exception {
        String partition = topic + "-partition-0";
        obs.put("topic", partition);
        Consumer<byte[]> consumer = consumer("sub", SubscriptionType.Exclusive, partition);
        Producer<byte[]> producer = producer(partition, false);
        Transaction t1 = newTxn(LONG_TXN_SECONDS);
        Transaction t2 = newTxn(LONG_TXN_SECONDS);
        obs.put("txn_ids", List.of(id(t1), id(t2)));
        send(producer, t1, "a1");
        send(producer, t2, "b1");
        send(producer, null, "p1");
        obs.put("t2_commit_error", outcome(() -> t2.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("after_t2_commit", texts(within(consumer, QUIET_MS)));
        obs.put("t1_abort_error", outcome(() -> t1.abort().get(WAIT_SECONDS, SECONDS)));
        obs.put("after_t1_abort", texts(receive(consumer, 2, 10_000)));
        obs.put("extra", texts(within(consumer, EXTRA_MS)));
    }

    /**
     * {@code consume_process_produce[_abort]}: 5 plain input messages; one txn receives each, produces
     * {@code processed-<payload>} to the output topic and acks the input in the txn. Commit: the output has the 5,
     * and a new consumer on the input subscription gets nothing. Abort: the output stays empty and the inputs are
     * redelivered.
     */
    private void consumeProcessProduce(String input, String output, boolean commit, SubscriptionType type)
            throws Exception {
        obs.put("subscription_type", type.name());
        Producer<byte[]> inputProducer = producer(input, false);
        for (int i = 0; i < 5; i++) {
            send(inputProducer, null, "m-" + i);
        }
        Consumer<byte[]> outputConsumer = consumer("out-sub", SubscriptionType.Exclusive, output);
        Consumer<byte[]> inputConsumer = consumer("cpp-sub", type, input);
        Producer<byte[]> outputProducer = producer(output, false);
        Transaction txn = newTxn(LONG_TXN_SECONDS);
        obs.put("txn_id", id(txn));
        List<String> consumed = new ArrayList<>();
        List<Object> ackErrors = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            Message<byte[]> msg = inputConsumer.receive(5, SECONDS);
            if (msg == null) {
                break;
            }
            consumed.add(text(msg));
            send(outputProducer, txn, "processed-" + text(msg));
            ackErrors.add(outcome(() -> inputConsumer.acknowledgeAsync(msg.getMessageId(), txn)
                    .get(WAIT_SECONDS, SECONDS)));
        }
        obs.put("consumed", consumed);
        obs.put("ack_errors", ackErrors);
        if (commit) {
            obs.put("commit_error", outcome(() -> txn.commit().get(WAIT_SECONDS, SECONDS)));
            obs.put("output", texts(receive(outputConsumer, 5, 10_000)));
            obs.put("extra", texts(within(outputConsumer, EXTRA_MS)));
            inputConsumer.close();
            Consumer<byte[]> again = consumer("cpp-sub", type, input);
            obs.put("input_after_commit", texts(within(again, QUIET_MS)));
        } else {
            obs.put("abort_error", outcome(() -> txn.abort().get(WAIT_SECONDS, SECONDS)));
            obs.put("output", texts(within(outputConsumer, QUIET_MS)));
            obs.put("redelivered", deliveries(receive(inputConsumer, 5, 10_000)));
        }
    }

    /**
     * {@code txn_ack_then_abort} (Pulsar's TransactionEndToEndTest.txnAckTest): 10 plain messages, all acked in
     * txn1: nothing is redelivered while txn1 is open; abort redelivers all 10; acked in txn2 and committed, nothing
     * comes back; ending txn2 again at the coordinator fails (TransactionNotFoundException in Pulsar).
     */
    private void txnAckThenAbort(String topic, SubscriptionType type) throws Exception {
        obs.put("subscription_type", type.name());
        Consumer<byte[]> consumer = consumer("test", type, topic);
        Producer<byte[]> producer = producer(topic, false);
        for (int i = 0; i < 10; i++) {
            send(producer, null, "m-" + i);
        }
        Transaction txn1 = newTxn(LONG_TXN_SECONDS);
        List<Message<byte[]>> first = receive(consumer, 10, 10_000);
        obs.put("first_received", texts(first));
        obs.put("txn1_ack_errors", ackAll(consumer, first, txn1));
        obs.put("before_abort", texts(within(consumer, QUIET_MS)));
        obs.put("abort_error", outcome(() -> txn1.abort().get(WAIT_SECONDS, SECONDS)));
        Transaction txn2 = newTxn(LONG_TXN_SECONDS);
        obs.put("txn_ids", List.of(id(txn1), id(txn2)));
        List<Message<byte[]>> again = receive(consumer, 10, 10_000);
        obs.put("after_abort", deliveries(again));
        obs.put("txn2_ack_errors", ackAll(consumer, again, txn2));
        obs.put("commit_error", outcome(() -> txn2.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("after_commit", texts(within(consumer, QUIET_MS)));
        // Pulsar's test forces the client-side state back to OPEN; the coordinator client sends the same END_TXN.
        obs.put("recommit_error", outcome(() -> tc().commitAsync(txn2.getTxnID()).get(WAIT_SECONDS, SECONDS)));
    }

    /**
     * {@code commit_after_abort}: abort a txn (which sent one message), then commit it: the client refuses locally,
     * and the coordinator (asked directly) no longer knows the txn. The aborted message stays invisible.
     */
    private void commitAfterAbort(String topic) throws Exception {
        Producer<byte[]> producer = producer(topic, false);
        Transaction txn = newTxn(LONG_TXN_SECONDS);
        obs.put("txn_id", id(txn));
        send(producer, txn, "x");
        obs.put("abort_error", outcome(() -> txn.abort().get(WAIT_SECONDS, SECONDS)));
        obs.put("client_commit_error", outcome(() -> txn.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("server_commit_error", outcome(() -> tc().commitAsync(txn.getTxnID()).get(WAIT_SECONDS, SECONDS)));
        obs.put("server_abort_again_error",
                outcome(() -> tc().abortAsync(txn.getTxnID()).get(WAIT_SECONDS, SECONDS)));
        Consumer<byte[]> consumer = consumer("sub", SubscriptionType.Exclusive, topic);
        obs.put("visible", texts(within(consumer, 500)));
    }

    /**
     * {@code ack_conflict}: txn1 acks m, then txn2 acks m (TransactionConflictException); n is acked plainly, then
     * txn3 acks n (conflict: already acked). txn2's commit fails because an op failed; txn1 commits; nothing comes
     * back.
     */
    private void ackConflict(String topic) throws Exception {
        Producer<byte[]> producer = producer(topic, false);
        send(producer, null, "m");
        send(producer, null, "n");
        Consumer<byte[]> consumer = consumer("sub", SubscriptionType.Shared, topic);
        Map<String, Message<byte[]>> byPayload = new LinkedHashMap<>();
        for (Message<byte[]> msg : receive(consumer, 2, 10_000)) {
            byPayload.put(text(msg), msg);
        }
        obs.put("received", new ArrayList<>(byPayload.keySet()));
        MessageId m = byPayload.get("m").getMessageId();
        MessageId n = byPayload.get("n").getMessageId();
        Transaction txn1 = newTxn(LONG_TXN_SECONDS);
        Transaction txn2 = newTxn(LONG_TXN_SECONDS);
        Transaction txn3 = newTxn(LONG_TXN_SECONDS);
        obs.put("txn_ids", List.of(id(txn1), id(txn2), id(txn3)));
        obs.put("txn1_ack_error", outcome(() -> consumer.acknowledgeAsync(m, txn1).get(WAIT_SECONDS, SECONDS)));
        obs.put("txn2_ack_error", outcome(() -> consumer.acknowledgeAsync(m, txn2).get(WAIT_SECONDS, SECONDS)));
        obs.put("plain_ack_error", outcome(() -> consumer.acknowledgeAsync(n).get(WAIT_SECONDS, SECONDS)));
        obs.put("txn3_ack_error", outcome(() -> consumer.acknowledgeAsync(n, txn3).get(WAIT_SECONDS, SECONDS)));
        obs.put("txn2_commit_error", outcome(() -> txn2.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("txn3_commit_error", outcome(() -> txn3.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("txn1_commit_error", outcome(() -> txn1.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("txn_states", List.of(txn1.getState().name(), txn2.getState().name(), txn3.getState().name()));
        obs.put("after_commit", texts(within(consumer, QUIET_MS)));
    }

    /**
     * {@code txn_timeout}: a txn with a 2 s timeout sends 3 messages to the output topic and acks one consumed input
     * message; after 4 s the coordinator has aborted it: the 3 messages never show, the input is redelivered, and
     * commit fails (locally, and at the coordinator). Plain output messages then flow.
     */
    private void txnTimeout(String input, String output) throws Exception {
        Producer<byte[]> inputProducer = producer(input, false);
        send(inputProducer, null, "in-0");
        Consumer<byte[]> inputConsumer = consumer("sub", SubscriptionType.Shared, input);
        Consumer<byte[]> outputConsumer = consumer("out-sub", SubscriptionType.Exclusive, output);
        Producer<byte[]> outputProducer = producer(output, false);
        Message<byte[]> consumed = inputConsumer.receive(5, SECONDS);
        obs.put("consumed", consumed == null ? null : text(consumed));
        if (consumed == null) {
            return;
        }
        Transaction txn = newTxn(2);
        obs.put("txn_id", id(txn));
        for (int i = 0; i < 3; i++) {
            send(outputProducer, txn, "t-" + i);
        }
        obs.put("ack_error", outcome(() -> inputConsumer.acknowledgeAsync(consumed.getMessageId(), txn)
                .get(WAIT_SECONDS, SECONDS)));
        Thread.sleep(4000);
        obs.put("output", texts(within(outputConsumer, EXTRA_MS)));
        obs.put("redelivered", deliveries(receive(inputConsumer, 1, 3000)));
        obs.put("client_state", txn.getState().name());
        obs.put("client_commit_error", outcome(() -> txn.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("server_commit_error", outcome(() -> tc().commitAsync(txn.getTxnID()).get(WAIT_SECONDS, SECONDS)));
        for (int i = 0; i < 3; i++) {
            send(outputProducer, null, "plain-" + i);
        }
        obs.put("plain_after_timeout", texts(receive(outputConsumer, 3, 10_000)));
    }

    /**
     * {@code crash_prepare}: plain-before-0..2 are sent and received on subscription crash-sub; plain-before-0 is
     * acked plainly. Txn O sends O-0..2; txn C sends C-0..2 and acks plain-before-1. Both have the given timeout and
     * are left open: the process exits without ending them (the server is then killed and restarted).
     */
    private void crashPrepare(String topic, long timeoutSeconds) throws Exception {
        Consumer<byte[]> consumer = consumer("crash-sub", SubscriptionType.Exclusive, topic);
        Producer<byte[]> producer = producer(topic, false);
        for (int i = 0; i < 3; i++) {
            send(producer, null, "plain-before-" + i);
        }
        Map<String, Message<byte[]>> byPayload = new LinkedHashMap<>();
        for (Message<byte[]> msg : receive(consumer, 3, 10_000)) {
            byPayload.put(text(msg), msg);
        }
        obs.put("received_before", new ArrayList<>(byPayload.keySet()));
        consumer.acknowledgeAsync(byPayload.get("plain-before-0").getMessageId()).get(WAIT_SECONDS, SECONDS);
        Transaction open = newTxn(timeoutSeconds);
        for (int i = 0; i < 3; i++) {
            send(producer, open, "O-" + i);
        }
        Transaction other = newTxn(timeoutSeconds);
        for (int i = 0; i < 3; i++) {
            send(producer, other, "C-" + i);
        }
        consumer.acknowledgeAsync(byPayload.get("plain-before-1").getMessageId(), other)
                .get(WAIT_SECONDS, SECONDS);
        Map<String, Object> ids = new LinkedHashMap<>();
        ids.put("O", id(open));
        ids.put("C", id(other));
        obs.put("txn_ids", ids);
    }

    /** {@code commit_and_verify}: txn K sends K-0..2 and commits; a consumer (subscription pre) receives them. */
    private void commitAndVerify(String topic) throws Exception {
        Consumer<byte[]> consumer = consumer("pre", SubscriptionType.Exclusive, topic);
        Producer<byte[]> producer = producer(topic, false);
        Transaction txn = newTxn(LONG_TXN_SECONDS);
        obs.put("txn_id", id(txn));
        for (int i = 0; i < 3; i++) {
            send(producer, txn, "K-" + i);
        }
        obs.put("commit_error", outcome(() -> txn.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("visible_before_crash", texts(receive(consumer, 3, 10_000)));
    }

    /**
     * {@code crash_verify <topic> <subscription> <maxSeconds> <expectCount>}: subscribes (Earliest for a new
     * subscription), sends plain-after-0..2, receives until expectCount messages or maxSeconds, then a little more; then
     * opens and commits a new txn (its id must not reuse one from before the crash).
     */
    private void crashVerify(String topic, String subscription, long maxSeconds, int expectCount)
            throws Exception {
        Consumer<byte[]> consumer = consumer(subscription, SubscriptionType.Exclusive, topic);
        Producer<byte[]> producer = producer(topic, false);
        for (int i = 0; i < 3; i++) {
            send(producer, null, "plain-after-" + i);
        }
        long began = System.nanoTime();
        obs.put("received", deliveries(receive(consumer, expectCount, maxSeconds * 1000)));
        obs.put("waited_ms", (System.nanoTime() - began) / 1_000_000);
        obs.put("extra", texts(within(consumer, EXTRA_MS)));
        Transaction txn = newTxn(LONG_TXN_SECONDS);
        obs.put("new_txn_id", id(txn));
        obs.put("new_txn_commit_error", outcome(() -> txn.commit().get(WAIT_SECONDS, SECONDS)));
    }

    // ---------------------------------------------------------------- helpers

    /**
     * Closes the producers and consumers (CLOSE_PRODUCER / CLOSE_CONSUMER), waiting at most {@code seconds}. The
     * client itself is not closed: its event loop shutdown alone waits a 2 s quiet period, and the process exits.
     */
    void closeAll(long seconds) throws Exception {
        List<CompletableFuture<Void>> closing = new ArrayList<>();
        for (Supplier<CompletableFuture<Void>> closer : closers) {
            closing.add(closer.get());
        }
        CompletableFuture.allOf(closing.toArray(CompletableFuture[]::new)).get(seconds, SECONDS);
    }

    private Producer<byte[]> producer(String topic, boolean batched) throws PulsarClientException {
        Producer<byte[]> producer = client.newProducer()
                .topic(topic)
                .sendTimeout(0, SECONDS)
                .enableBatching(batched)
                .create();
        closers.add(producer::closeAsync);
        return producer;
    }

    private Consumer<byte[]> consumer(String subscription, SubscriptionType type, String... topics)
            throws PulsarClientException {
        Consumer<byte[]> consumer = client.newConsumer()
                .topic(topics)
                .subscriptionName(subscription)
                .subscriptionType(type)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .acknowledgmentGroupTime(0, MILLISECONDS)
                .isAckReceiptEnabled(true)
                .subscribe();
        closers.add(consumer::closeAsync);
        return consumer;
    }

    private Transaction newTxn(long timeoutSeconds) throws Exception {
        return client.newTransaction()
                .withTransactionTimeout(timeoutSeconds, SECONDS)
                .build()
                .get(WAIT_SECONDS, SECONDS);
    }

    /** The coordinator client: sends END_TXN for a txn id regardless of the client-side transaction state. */
    private TransactionCoordinatorClientImpl tc() {
        return ((PulsarClientImpl) client).getTcClient();
    }

    private static TypedMessageBuilder<byte[]> message(Producer<byte[]> producer, Transaction txn, String payload) {
        TypedMessageBuilder<byte[]> builder = txn == null ? producer.newMessage() : producer.newMessage(txn);
        return builder.value(payload.getBytes(UTF_8));
    }

    private static MessageId send(Producer<byte[]> producer, Transaction txn, String payload) throws Exception {
        return message(producer, txn, payload).sendAsync().get(WAIT_SECONDS, SECONDS);
    }

    /** Acks each message in {@code txn}; one outcome per message (null = acknowledged). */
    private static List<Object> ackAll(Consumer<byte[]> consumer, List<Message<byte[]>> messages, Transaction txn) {
        List<Object> outcomes = new ArrayList<>();
        for (Message<byte[]> msg : messages) {
            outcomes.add(outcome(() -> consumer.acknowledgeAsync(msg.getMessageId(), txn)
                    .get(WAIT_SECONDS, SECONDS)));
        }
        return outcomes;
    }

    /** Receives until {@code count} messages arrived or {@code timeoutMs} passed. */
    private static List<Message<byte[]>> receive(Consumer<byte[]> consumer, int count, long timeoutMs)
            throws PulsarClientException {
        List<Message<byte[]>> received = new ArrayList<>();
        long deadline = System.nanoTime() + timeoutMs * 1_000_000;
        while (received.size() < count) {
            long left = (deadline - System.nanoTime()) / 1_000_000;
            if (left <= 0) {
                break;
            }
            Message<byte[]> msg = consumer.receive((int) left, MILLISECONDS);
            if (msg == null) {
                break;
            }
            received.add(msg);
        }
        return received;
    }

    /** Everything that arrives within the next {@code windowMs}. */
    private static List<Message<byte[]>> within(Consumer<byte[]> consumer, long windowMs)
            throws PulsarClientException {
        return receive(consumer, Integer.MAX_VALUE, windowMs);
    }

    private static String text(Message<byte[]> msg) {
        return new String(msg.getValue(), UTF_8);
    }

    private static List<String> texts(List<Message<byte[]>> messages) {
        List<String> out = new ArrayList<>();
        for (Message<byte[]> msg : messages) {
            out.add(text(msg));
        }
        return out;
    }

    /** Payload, redelivery count and (partition) topic of each message, in arrival order. */
    private static List<Map<String, Object>> deliveries(List<Message<byte[]>> messages) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Message<byte[]> msg : messages) {
            Map<String, Object> d = new LinkedHashMap<>();
            d.put("payload", text(msg));
            d.put("redelivery_count", msg.getRedeliveryCount());
            d.put("topic", msg.getTopicName());
            out.add(d);
        }
        return out;
    }

    private static String id(Transaction txn) {
        TxnID id = txn.getTxnID();
        return id.getMostSigBits() + ":" + id.getLeastSigBits();
    }

    /** Null when the step succeeded, else the description of its exception. */
    private static Map<String, Object> outcome(Step step) {
        try {
            step.run();
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return describe(e);
        } catch (Exception e) {
            return describe(e);
        }
    }

    /**
     * {type, message, chain}: the simple class name and message of the exception after unwrapping future wrappers
     * (ExecutionException, CompletionException), and the simple names of it and its causes.
     */
    static Map<String, Object> describe(Throwable t) {
        Throwable e = t;
        while ((e instanceof ExecutionException || e instanceof CompletionException) && e.getCause() != null) {
            e = e.getCause();
        }
        List<String> chain = new ArrayList<>();
        Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        for (Throwable c = e; c != null && seen.add(c); c = c.getCause()) {
            chain.add(c.getClass().getSimpleName());
        }
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("type", e.getClass().getSimpleName());
        d.put("message", e.getMessage());
        d.put("chain", chain);
        return d;
    }

    private static String arg(List<String> args, int index) {
        if (index >= args.size()) {
            throw new IllegalArgumentException("missing argument #" + (index + 1));
        }
        return args.get(index);
    }

    private static boolean flag(List<String> args, int index, String name) {
        return index < args.size() && args.get(index).equals(name);
    }

    private static SubscriptionType subType(List<String> args, int index, String fallback) {
        return SubscriptionType.valueOf(index < args.size() ? args.get(index) : fallback);
    }
}
