package dev.pulsartxnproxy;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;

import java.nio.file.Files;
import java.nio.file.Path;
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
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.TopicMessageId;
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
            "crash_verify", "hang_prepare", "hang_verify", "reader_open_txn", "batch_ack_conflict",
            "aborted_then_committed", "spin_hold", "end_then_die", "end_verify", "keyed_txns", "message_ids",
            "late_send_after_timeout", "end_errors", "missing_namespace_end",
            "crash_loop", "partial_batch_permits",
            "ack_batch_cumulative", "ack_batch_individual", "ack_two_aborts", "ack_cumulative_open",
            "dead_letter_initial_subscription",
            "max_size_batches", "pattern_watch", "listener_produce");

    /** Scenarios that leave the process with open transactions or unanswered requests on purpose: no close. */
    static final Set<String> LEAVE_OPEN = Set.of("crash_prepare", "hang_prepare", "end_then_die");

    /** Bound on any single client future, so that a server that never answers cannot hang the harness. */
    private static final long WAIT_SECONDS = 15;
    /** Timeout of transactions that must stay open for the whole scenario. */
    private static final long LONG_TXN_SECONDS = 60;
    /**
     * How long expected messages are waited for (they end the wait as soon as they are all in): generous, so that a
     * loaded machine observes the same; a broker that delivers fewer only costs this wait.
     */
    static final long SETTLE_MS = 30_000;
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

    /**
     * The client every scenario uses; building it connects to the transaction coordinators, unless the environment
     * variable HARNESS_TRANSACTIONS is "false" (the conformance command sets it for a broker without coordinators,
     * where a client with transactions enabled cannot even be built).
     */
    static PulsarClient newClient(String url) throws PulsarClientException {
        return HarnessSecurity.apply(PulsarClient.builder()
                .serviceUrl(url)
                .enableTransaction(!"false".equals(System.getenv("HARNESS_TRANSACTIONS")))
                .operationTimeout(10, SECONDS))
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
                    Integer.parseInt(arg(args, 3)), args.size() > 4 ? args.get(4) : null);
            case "hang_prepare" -> hangPrepare(arg(args, 0), Long.parseLong(arg(args, 1)));
            case "hang_verify" -> hangVerify(arg(args, 0), arg(args, 1));
            case "reader_open_txn" -> readerOpenTxn(arg(args, 0));
            case "batch_ack_conflict" -> batchAckConflict(arg(args, 0));
            case "aborted_then_committed" -> abortedThenCommitted(arg(args, 0), flag(args, 1, "batched"));
            case "spin_hold" -> spinHold(arg(args, 0), Path.of(arg(args, 1)), Path.of(arg(args, 2)));
            case "end_then_die" -> endThenDie(arg(args, 0), flag(args, 1, "commit"));
            case "end_verify" -> endVerify(arg(args, 0), flag(args, 1, "commit"), arg(args, 2));
            case "keyed_txns" -> keyedTxns(arg(args, 0), flag(args, 1, "batched"));
            case "message_ids" -> new MessageIdScenarios(client, obs).run(arg(args, 0));
            case "late_send_after_timeout" -> new CoordinatorScenarios(client, obs).lateSendAfterTimeout(arg(args, 0));
            case "end_errors" -> new CoordinatorScenarios(client, obs).endErrors();
            case "missing_namespace_end" -> new CoordinatorScenarios(client, obs).missingNamespaceEnd(arg(args, 0));
            case "crash_loop" -> new LoopScenarios(client, obs).crashLoop(arg(args, 0), arg(args, 1),
                    Integer.parseInt(arg(args, 2)), Long.parseLong(arg(args, 3)),
                    Set.copyOf(args.subList(4, args.size())));
            case "partial_batch_permits" ->
                    new PermitScenarios(client, obs).partialBatchPermits(arg(args, 0), args.contains("txn"),
                            args.contains("Shared") ? SubscriptionType.Shared : SubscriptionType.Failover);
            case "ack_batch_cumulative" -> acks().batchCumulative(arg(args, 0), Integer.parseInt(arg(args, 1)),
                    flag(args, 2, "commit"));
            case "ack_batch_individual" -> acks().batchIndividual(arg(args, 0), subType(args, 1, "Exclusive"),
                    flag(args, 2, "commit"));
            case "ack_cumulative_open" -> acks().cumulativeOpen(arg(args, 0), Integer.parseInt(arg(args, 1)));
            case "ack_two_aborts" -> acks().twoAborts(arg(args, 0), subType(args, 1, "Failover"),
                    args.contains("batched"), args.contains("cumulative"));
            case "dead_letter_initial_subscription" -> new DeadLetterScenarios(client, obs)
                    .initialSubscription(arg(args, 0), arg(args, 1), args.contains("initial"));
            case "max_size_batches" -> new MessageSizeScenarios(client, obs).maxSizeBatches(arg(args, 0),
                    Integer.parseInt(arg(args, 1)), Integer.parseInt(arg(args, 2)));
            case "pattern_watch" -> new TopicWatchScenarios(client, obs).patternWatch(arg(args, 0), arg(args, 1));
            case "listener_produce" -> new ListenerScenarios(client, obs).produce(arg(args, 0), arg(args, 1));
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
            obs.put("after_commit", texts(receive(consumer, 15, SETTLE_MS)));
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
            obs.put("plain_after_abort", texts(receive(consumer, 6, SETTLE_MS)));
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
        obs.put("after_commit", texts(receive(consumer, 3, SETTLE_MS)));
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
        obs.put("after_t1_abort", texts(receive(consumer, 2, SETTLE_MS)));
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
            Message<byte[]> msg = inputConsumer.receive((int) SETTLE_MS, MILLISECONDS);
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
            obs.put("output", texts(receive(outputConsumer, 5, SETTLE_MS)));
            obs.put("extra", texts(within(outputConsumer, EXTRA_MS)));
            inputConsumer.close();
            Consumer<byte[]> again = consumer("cpp-sub", type, input);
            obs.put("input_after_commit", texts(within(again, QUIET_MS)));
        } else {
            obs.put("abort_error", outcome(() -> txn.abort().get(WAIT_SECONDS, SECONDS)));
            obs.put("output", texts(within(outputConsumer, QUIET_MS)));
            obs.put("redelivered", deliveries(receive(inputConsumer, 5, SETTLE_MS)));
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
        List<Message<byte[]>> first = receive(consumer, 10, SETTLE_MS);
        obs.put("first_received", texts(first));
        obs.put("txn1_ack_errors", ackAll(consumer, first, txn1));
        obs.put("before_abort", texts(within(consumer, QUIET_MS)));
        obs.put("abort_error", outcome(() -> txn1.abort().get(WAIT_SECONDS, SECONDS)));
        Transaction txn2 = newTxn(LONG_TXN_SECONDS);
        obs.put("txn_ids", List.of(id(txn1), id(txn2)));
        List<Message<byte[]>> again = receive(consumer, 10, SETTLE_MS);
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
        for (Message<byte[]> msg : receive(consumer, 2, SETTLE_MS)) {
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
        Message<byte[]> consumed = inputConsumer.receive((int) SETTLE_MS, MILLISECONDS);
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
        obs.put("redelivered", deliveries(receive(inputConsumer, 1, SETTLE_MS)));
        obs.put("client_state", txn.getState().name());
        obs.put("client_commit_error", outcome(() -> txn.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("server_commit_error", outcome(() -> tc().commitAsync(txn.getTxnID()).get(WAIT_SECONDS, SECONDS)));
        for (int i = 0; i < 3; i++) {
            send(outputProducer, null, "plain-" + i);
        }
        obs.put("plain_after_timeout", texts(receive(outputConsumer, 3, SETTLE_MS)));
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
        for (Message<byte[]> msg : receive(consumer, 3, SETTLE_MS)) {
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
        obs.put("visible_before_crash", texts(receive(consumer, 3, SETTLE_MS)));
    }

    /**
     * {@code crash_verify <topic> <subscription> <maxSeconds> <expectCount> [oldTxnId]}: subscribes (Earliest for a
     * new subscription), sends plain-after-0..2, receives until expectCount messages or maxSeconds, then a little more;
     * then opens and commits a new txn (its id must not reuse one from before the crash). With {@code oldTxnId}
     * ({@code most:least}, a txn ended before the crash), commits and aborts it again at the coordinator.
     */
    private void crashVerify(String topic, String subscription, long maxSeconds, int expectCount, String oldTxn)
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
        if (oldTxn != null) {
            endAgain(txnId(oldTxn));
        }
    }

    // ---------------------------------------------------------------- pitfalls (shared/docs/transaction-pitfalls.md)

    /**
     * {@code hang_prepare <topic> <timeoutSeconds>} (pitfalls #1, #5): on partition 0, m is sent plainly and received
     * on Shared subscription s; txn H (with the timeout) acks m and sends t-0; p-0 and p-1 are sent plainly behind it.
     * A new subscription, watch, sees only m (the rest waits behind H) and acks it. Then the process exits without
     * ending H, like an application that dies before its commit.
     */
    private void hangPrepare(String topic, long timeoutSeconds) throws Exception {
        String partition = topic + "-partition-0";
        Producer<byte[]> producer = producer(partition, false);
        Consumer<byte[]> shared = consumer("s", SubscriptionType.Shared, partition);
        send(producer, null, "m");
        Message<byte[]> m = shared.receive((int) SETTLE_MS, MILLISECONDS);
        obs.put("received", m == null ? null : text(m));
        if (m == null) {
            return;
        }
        Transaction txn = newTxn(timeoutSeconds);
        obs.put("txn_id", id(txn));
        obs.put("ack_error", outcome(() -> shared.acknowledgeAsync(m.getMessageId(), txn).get(WAIT_SECONDS, SECONDS)));
        send(producer, txn, "t-0");
        send(producer, null, "p-0");
        send(producer, null, "p-1");
        Consumer<byte[]> watch = consumer("watch", SubscriptionType.Exclusive, partition);
        List<Message<byte[]>> seen = within(watch, QUIET_MS);
        obs.put("watch_while_open", texts(seen));
        for (Message<byte[]> msg : seen) {
            watch.acknowledgeAsync(msg.getMessageId()).get(WAIT_SECONDS, SECONDS);
        }
    }

    /**
     * {@code hang_verify <topic> <txnId>}: after hang_prepare's process died, H times out at the coordinator: watch
     * gets p-0 and p-1 (t-0 was aborted), s gets m again with p-0 and p-1 (acked plainly), and m acked in a new txn
     * commits (no "in pending ack status" conflict left over from H). H is then unknown to the coordinator.
     */
    private void hangVerify(String topic, String hangingTxn) throws Exception {
        String partition = topic + "-partition-0";
        Consumer<byte[]> watch = consumer("watch", SubscriptionType.Exclusive, partition);
        Consumer<byte[]> shared = consumer("s", SubscriptionType.Shared, partition);
        long began = System.nanoTime();
        obs.put("watch_after_timeout", texts(receive(watch, 2, SETTLE_MS)));
        obs.put("watch_waited_ms", (System.nanoTime() - began) / 1_000_000);
        obs.put("watch_extra", texts(within(watch, EXTRA_MS)));
        Map<String, Message<byte[]>> byPayload = new LinkedHashMap<>();
        for (Message<byte[]> msg : receive(shared, 3, SETTLE_MS)) {
            byPayload.put(text(msg), msg);
        }
        obs.put("shared_after_timeout", new ArrayList<>(byPayload.keySet()));
        Message<byte[]> m = byPayload.remove("m");
        if (m == null) {
            return;
        }
        for (Message<byte[]> msg : byPayload.values()) {
            shared.acknowledgeAsync(msg.getMessageId()).get(WAIT_SECONDS, SECONDS);
        }
        Transaction txn = newTxn(LONG_TXN_SECONDS);
        obs.put("reack_error", outcome(() -> shared.acknowledgeAsync(m.getMessageId(), txn)
                .get(WAIT_SECONDS, SECONDS)));
        obs.put("reack_commit_error", outcome(() -> txn.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("shared_after_commit", texts(within(shared, QUIET_MS)));
        endAgain(txnId(hangingTxn));
    }

    /**
     * {@code reader_open_txn <topic>} (pitfalls #2, #11): a Reader on partition 0 reads p0; then t1 (in txn T) and p1
     * (plain, behind T) are sent. At each step the reader's hasMessageAvailable and getLastMessageIds are recorded:
     * while T is open neither may point past p0; after T commits they point at p1 (not at T's commit marker); after
     * txn A sends a1 and aborts they still point at p1 (not at a1 or A's abort marker); after plain p2, at p2.
     */
    private void readerOpenTxn(String topic) throws Exception {
        String partition = topic + "-partition-0";
        Producer<byte[]> producer = producer(partition, false);
        obs.put("sent_p0", position(send(producer, null, "p0")));
        Reader<byte[]> reader = reader(partition);
        obs.put("read_first", texts(read(reader, 1, SETTLE_MS)));
        obs.put("caught_up", readerState(reader));
        Transaction txn = newTxn(LONG_TXN_SECONDS);
        obs.put("sent_t1", position(send(producer, txn, "t1")));
        obs.put("open_txn", readerState(reader));
        obs.put("sent_p1", position(send(producer, null, "p1")));
        obs.put("plain_behind_open_txn", readerState(reader));
        obs.put("read_while_open", texts(read(reader, Integer.MAX_VALUE, QUIET_MS)));
        obs.put("commit_error", outcome(() -> txn.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("after_commit", readerState(reader));
        obs.put("read_after_commit", texts(read(reader, 2, SETTLE_MS)));
        obs.put("after_reading", readerState(reader));
        Transaction aborted = newTxn(LONG_TXN_SECONDS);
        obs.put("sent_a1", position(send(producer, aborted, "a1")));
        obs.put("abort_error", outcome(() -> aborted.abort().get(WAIT_SECONDS, SECONDS)));
        obs.put("after_abort", readerState(reader));
        obs.put("read_after_abort", texts(read(reader, Integer.MAX_VALUE, QUIET_MS)));
        obs.put("sent_p2", position(send(producer, null, "p2")));
        obs.put("after_p2", readerState(reader));
        obs.put("read_after_p2", texts(read(reader, 1, SETTLE_MS)));
        obs.put("at_end", readerState(reader));
    }

    /**
     * {@code batch_ack_conflict <topic>} (pitfall #7): m-0..m-3 are one batch on partition 0, received by a Shared
     * consumer with batch-index acknowledgement. txn1 acks m-0, txn2 acks m-0 (conflict), txn3 acks m-1 (another
     * index of the same batch: no conflict), txn4 acks m-1 (conflict). After the commits, a new consumer gets m-2 and
     * m-3 only; txn5 acks both (two acks of one entry), txn6 acks m-2 (conflict). While txn5 is open a new consumer
     * gets nothing (every remaining index is held); txn5 commits and nothing is left.
     */
    private void batchAckConflict(String topic) throws Exception {
        String partition = topic + "-partition-0";
        Producer<byte[]> producer = client.newProducer()
                .topic(partition)
                .sendTimeout(0, SECONDS)
                .enableBatching(true)
                .batchingMaxMessages(100)
                .batchingMaxPublishDelay(1, SECONDS)
                .create();
        closers.add(producer::closeAsync);
        sendAll(producer, null, "m-0", "m-1", "m-2", "m-3");
        Consumer<byte[]> consumer = batchIndexConsumer(partition);
        Map<String, Message<byte[]>> byPayload = new LinkedHashMap<>();
        List<Object> positions = new ArrayList<>();
        for (Message<byte[]> msg : receive(consumer, 4, SETTLE_MS)) {
            byPayload.put(text(msg), msg);
            positions.add(position(msg.getMessageId()));
        }
        obs.put("received", new ArrayList<>(byPayload.keySet()));
        obs.put("positions", positions);
        MessageId m0 = byPayload.get("m-0").getMessageId();
        MessageId m1 = byPayload.get("m-1").getMessageId();
        Transaction txn1 = newTxn(LONG_TXN_SECONDS);
        Transaction txn2 = newTxn(LONG_TXN_SECONDS);
        Transaction txn3 = newTxn(LONG_TXN_SECONDS);
        Transaction txn4 = newTxn(LONG_TXN_SECONDS);
        obs.put("txn1_ack_m0", outcome(() -> consumer.acknowledgeAsync(m0, txn1).get(WAIT_SECONDS, SECONDS)));
        obs.put("txn2_ack_m0", outcome(() -> consumer.acknowledgeAsync(m0, txn2).get(WAIT_SECONDS, SECONDS)));
        obs.put("txn3_ack_m1", outcome(() -> consumer.acknowledgeAsync(m1, txn3).get(WAIT_SECONDS, SECONDS)));
        obs.put("txn4_ack_m1", outcome(() -> consumer.acknowledgeAsync(m1, txn4).get(WAIT_SECONDS, SECONDS)));
        obs.put("commit_errors", List.of(
                outcomeOrOk(() -> txn1.commit().get(WAIT_SECONDS, SECONDS)),
                outcomeOrOk(() -> txn2.commit().get(WAIT_SECONDS, SECONDS)),
                outcomeOrOk(() -> txn3.commit().get(WAIT_SECONDS, SECONDS)),
                outcomeOrOk(() -> txn4.commit().get(WAIT_SECONDS, SECONDS))));
        consumer.close();
        Consumer<byte[]> again = batchIndexConsumer(partition);
        List<Message<byte[]>> left = receive(again, 2, SETTLE_MS);
        obs.put("left_after_commits", texts(left));
        obs.put("left_extra", texts(within(again, EXTRA_MS)));
        Transaction txn5 = newTxn(LONG_TXN_SECONDS);
        Transaction txn6 = newTxn(LONG_TXN_SECONDS);
        obs.put("txn5_ack_errors", ackAll(again, left, txn5));
        if (!left.isEmpty()) {
            Message<byte[]> first = left.get(0);
            obs.put("txn6_ack_first", outcome(() -> again.acknowledgeAsync(first.getMessageId(), txn6)
                    .get(WAIT_SECONDS, SECONDS)));
        }
        again.close();
        Consumer<byte[]> held = batchIndexConsumer(partition);
        obs.put("while_txn5_holds_rest", texts(within(held, QUIET_MS)));
        obs.put("txn5_commit_error", outcome(() -> txn5.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("txn6_commit_error", outcome(() -> txn6.commit().get(WAIT_SECONDS, SECONDS)));
        held.close();
        Consumer<byte[]> last = batchIndexConsumer(partition);
        obs.put("left_at_end", texts(within(last, QUIET_MS)));
    }

    /**
     * {@code keyed_txns}: keyed messages in a committed transaction (k1=c1, k2=c2), then in an aborted one (k1=a1,
     * k3=a3), then one plain message (k4=p1); what a compaction of the topic keeps is checked from pytest.
     */
    private void keyedTxns(String topic, boolean batched) throws Exception {
        obs.put("batched", batched);
        Producer<byte[]> producer = producer(topic, batched);
        Transaction committed = newTxn(LONG_TXN_SECONDS);
        sendKeyed(producer, committed, "k1", "c1", "k2", "c2");
        obs.put("commit_error", outcome(() -> committed.commit().get(WAIT_SECONDS, SECONDS)));
        Transaction aborted = newTxn(LONG_TXN_SECONDS);
        sendKeyed(producer, aborted, "k1", "a1", "k3", "a3");
        obs.put("abort_error", outcome(() -> aborted.abort().get(WAIT_SECONDS, SECONDS)));
        sendKeyed(producer, null, "k4", "p1");
    }

    /** Sends {@code key, payload} pairs asynchronously (one batch when batching), then waits for every receipt. */
    private static void sendKeyed(Producer<byte[]> producer, Transaction txn, String... keysAndPayloads)
            throws Exception {
        List<CompletableFuture<MessageId>> sends = new ArrayList<>();
        for (int i = 0; i < keysAndPayloads.length; i += 2) {
            sends.add(message(producer, txn, keysAndPayloads[i + 1]).key(keysAndPayloads[i]).sendAsync());
        }
        producer.flush();
        for (CompletableFuture<MessageId> send : sends) {
            send.get(WAIT_SECONDS, SECONDS);
        }
    }

    /**
     * {@code aborted_then_committed <topic> [batched]} (pitfall #10): on partition 0, txn A sends a-0..a-2 and aborts,
     * txn C sends c-0, c-1 and commits, then p-0 is sent plainly. A consumer and a Reader attached before, and a
     * Reader created after, all get c-0, c-1, p-0 and nothing else, and the readers end with no message available.
     */
    private void abortedThenCommitted(String topic, boolean batched) throws Exception {
        String partition = topic + "-partition-0";
        obs.put("batched", batched);
        Consumer<byte[]> consumer = consumer("sub", SubscriptionType.Exclusive, partition);
        Reader<byte[]> tail = reader(partition);
        Producer<byte[]> producer = producer(partition, batched);
        Transaction aborted = newTxn(LONG_TXN_SECONDS);
        sendAll(producer, aborted, "a-0", "a-1", "a-2");
        obs.put("abort_error", outcome(() -> aborted.abort().get(WAIT_SECONDS, SECONDS)));
        Transaction committed = newTxn(LONG_TXN_SECONDS);
        sendAll(producer, committed, "c-0", "c-1");
        obs.put("commit_error", outcome(() -> committed.commit().get(WAIT_SECONDS, SECONDS)));
        sendAll(producer, null, "p-0");
        obs.put("consumer", texts(receive(consumer, 3, SETTLE_MS)));
        obs.put("consumer_extra", texts(within(consumer, EXTRA_MS)));
        obs.put("tail_reader", texts(read(tail, 3, SETTLE_MS)));
        obs.put("tail_reader_available", tail.hasMessageAvailable());
        Reader<byte[]> late = reader(partition);
        obs.put("late_reader", texts(read(late, 3, SETTLE_MS)));
        obs.put("late_reader_available", late.hasMessageAvailable());
        obs.put("late_reader_extra", texts(read(late, Integer.MAX_VALUE, EXTRA_MS)));
    }

    /**
     * {@code spin_hold <topic> <readyFile> <releaseFile>} (pitfalls #9, #13): on partition 0, m is sent and received
     * by an Exclusive consumer (acked) and a Shared consumer (acked in txn T, so a pending ack is held); T sends t-0
     * and p-0..p-9 are sent plainly behind it. While both consumers have permits and wait, the scenario creates
     * readyFile and idles until releaseFile exists (the test measures the server's CPU meanwhile).
     * Then: nothing was delivered in the meantime; T commits; both get t-0 and p-0..p-9.
     */
    private void spinHold(String topic, Path ready, Path release) throws Exception {
        String partition = topic + "-partition-0";
        Producer<byte[]> producer = producer(partition, false);
        Consumer<byte[]> exclusive = consumer("exclusive", SubscriptionType.Exclusive, partition);
        Consumer<byte[]> shared = consumer("shared", SubscriptionType.Shared, partition);
        send(producer, null, "m");
        Message<byte[]> m1 = exclusive.receive((int) SETTLE_MS, MILLISECONDS);
        Message<byte[]> m2 = shared.receive((int) SETTLE_MS, MILLISECONDS);
        obs.put("received", List.of(m1 == null ? "" : text(m1), m2 == null ? "" : text(m2)));
        if (m1 == null || m2 == null) {
            return;
        }
        exclusive.acknowledgeAsync(m1.getMessageId()).get(WAIT_SECONDS, SECONDS);
        Transaction txn = newTxn(LONG_TXN_SECONDS);
        obs.put("ack_error", outcome(() -> shared.acknowledgeAsync(m2.getMessageId(), txn)
                .get(WAIT_SECONDS, SECONDS)));
        send(producer, txn, "t-0");
        List<String> plain = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            plain.add("p-" + i);
        }
        sendAll(producer, null, plain.toArray(String[]::new));
        Files.writeString(ready, "ready");
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (!Files.exists(release) && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        obs.put("released", Files.exists(release));
        obs.put("exclusive_while_open", texts(within(exclusive, 200)));
        obs.put("shared_while_open", texts(within(shared, 200)));
        obs.put("commit_error", outcome(() -> txn.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("exclusive_after_commit", texts(receive(exclusive, 11, SETTLE_MS)));
        obs.put("shared_after_commit", texts(receive(shared, 11, SETTLE_MS)));
        obs.put("extra", texts(within(shared, EXTRA_MS)));
    }

    /**
     * {@code end_then_die <topic> <commit|abort>} (for a kill -9 in COMMITTING/ABORTING): in-0..2 are sent plainly
     * and received on Shared subscription pre; txn E sends K-0..K-5 and acks in-0..2; then E is committed (or
     * aborted) without waiting. Half a second later a new subscription, post, sees only in-0..2 (the server holds E
     * in COMMITTING/ABORTING, started with --txn-end-delay-ms), and the process exits.
     */
    private void endThenDie(String topic, boolean commit) throws Exception {
        Consumer<byte[]> pre = consumer("pre", SubscriptionType.Shared, topic);
        Producer<byte[]> producer = producer(topic, false);
        for (int i = 0; i < 3; i++) {
            send(producer, null, "in-" + i);
        }
        List<Message<byte[]>> in = receive(pre, 3, SETTLE_MS);
        obs.put("received", texts(in));
        Transaction txn = newTxn(LONG_TXN_SECONDS);
        obs.put("txn_id", id(txn));
        for (int i = 0; i < 6; i++) {
            send(producer, txn, "K-" + i);
        }
        obs.put("ack_errors", ackAll(pre, in, txn));
        CompletableFuture<Void> end = commit ? txn.commit() : txn.abort();
        Thread.sleep(500);
        Consumer<byte[]> post = consumer("post", SubscriptionType.Exclusive, topic);
        obs.put("visible_while_ending", texts(within(post, 500)));
        obs.put("end_completed", end.isDone());
    }

    /**
     * {@code end_verify <topic> <commit|abort> <txnId>}: after the kill and restart, a new subscription, after, gets
     * in-0..2 and, if E committed, all of K-0..K-5; subscription pre gets K-0..K-5 (E's acks of in-0..2 applied) if
     * E committed, or in-0..2 again if it aborted. E is unknown to the coordinator.
     */
    private void endVerify(String topic, boolean commit, String endedTxn) throws Exception {
        Consumer<byte[]> after = consumer("after", SubscriptionType.Exclusive, topic);
        obs.put("after", texts(receive(after, commit ? 9 : 3, SETTLE_MS)));
        obs.put("after_extra", texts(within(after, EXTRA_MS)));
        Consumer<byte[]> pre = consumer("pre", SubscriptionType.Shared, topic);
        obs.put("pre", texts(receive(pre, commit ? 6 : 3, SETTLE_MS)));
        obs.put("pre_extra", texts(within(pre, EXTRA_MS)));
        endAgain(txnId(endedTxn));
    }

    // ---------------------------------------------------------------- helpers

    /** The transactional acknowledgement scenarios (AckScenarios), sharing this run's client and closers. */
    private AckScenarios acks() {
        return new AckScenarios(client, obs, closers);
    }

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

    /** A Shared consumer of subscription sub with batch-index acknowledgement. */
    private Consumer<byte[]> batchIndexConsumer(String topic) throws PulsarClientException {
        Consumer<byte[]> consumer = client.newConsumer()
                .topic(topic)
                .subscriptionName("sub")
                .subscriptionType(SubscriptionType.Shared)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .enableBatchIndexAcknowledgment(true)
                .acknowledgmentGroupTime(0, MILLISECONDS)
                .isAckReceiptEnabled(true)
                .subscribe();
        closers.add(consumer::closeAsync);
        return consumer;
    }

    /** A Reader from the earliest message. */
    private Reader<byte[]> reader(String topic) throws PulsarClientException {
        Reader<byte[]> reader = client.newReader().topic(topic).startMessageId(MessageId.earliest).create();
        closers.add(reader::closeAsync);
        return reader;
    }

    /** {available: hasMessageAvailable(), last: the position getLastMessageIds() names}. */
    private static Map<String, Object> readerState(Reader<byte[]> reader) throws PulsarClientException {
        Map<String, Object> state = new LinkedHashMap<>();
        state.put("available", reader.hasMessageAvailable());
        List<TopicMessageId> last = reader.getLastMessageIds();
        state.put("last", last.isEmpty() ? null : position(last.get(0)));
        return state;
    }

    /** Commits and then aborts a txn by id at the coordinator; both outcomes. */
    private void endAgain(TxnID txn) {
        obs.put("old_commit_error", outcome(() -> tc().commitAsync(txn).get(WAIT_SECONDS, SECONDS)));
        obs.put("old_abort_error", outcome(() -> tc().abortAsync(txn).get(WAIT_SECONDS, SECONDS)));
    }

    private static TxnID txnId(String text) {
        String[] parts = text.split(":");
        return new TxnID(Long.parseLong(parts[0]), Long.parseLong(parts[1]));
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

    /** Sends the payloads asynchronously (one batch when batching), then waits for every receipt. */
    private static void sendAll(Producer<byte[]> producer, Transaction txn, String... payloads) throws Exception {
        List<CompletableFuture<MessageId>> sends = new ArrayList<>();
        for (String payload : payloads) {
            sends.add(message(producer, txn, payload).sendAsync());
        }
        producer.flush();
        for (CompletableFuture<MessageId> send : sends) {
            send.get(WAIT_SECONDS, SECONDS);
        }
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
    static List<Message<byte[]>> receive(Consumer<byte[]> consumer, int count, long timeoutMs)
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

    /** Reads until {@code count} messages arrived or {@code timeoutMs} passed. */
    private static List<Message<byte[]>> read(Reader<byte[]> reader, int count, long timeoutMs)
            throws PulsarClientException {
        List<Message<byte[]>> received = new ArrayList<>();
        long deadline = System.nanoTime() + timeoutMs * 1_000_000;
        while (received.size() < count) {
            long left = (deadline - System.nanoTime()) / 1_000_000;
            if (left <= 0) {
                break;
            }
            Message<byte[]> msg = reader.readNext((int) left, MILLISECONDS);
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

    static String text(Message<byte[]> msg) {
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

    /** {@code ledger:entry} of a message id, with {@code :batchIndex} for a message of a batch. */
    private static String position(MessageId messageId) {
        if (messageId instanceof MessageIdAdv adv) {
            String at = adv.getLedgerId() + ":" + adv.getEntryId();
            return adv.getBatchIndex() >= 0 ? at + ":" + adv.getBatchIndex() : at;
        }
        return messageId.toString();
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

    /** Like {@link #outcome}, but "ok" instead of null, for lists of outcomes. */
    private static Object outcomeOrOk(Step step) {
        Map<String, Object> result = outcome(step);
        return result == null ? "ok" : result;
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
