package dev.pulsartxnproxy;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.client.impl.PulsarClientImpl;
import org.apache.pulsar.client.impl.transaction.TransactionCoordinatorClientImpl;
import org.apache.pulsar.client.impl.transaction.TransactionImpl;

/**
 * Coordinator corner cases where the answers of the server, texts included, are the observation: sends in a
 * transaction that timed out, ends of transactions with timeouts below the coordinator's tick (0 and -1, which
 * travels as 2^64-1), ends of unknown and ended transactions, and the end of a transaction that touched a namespace
 * that does not exist. Transaction ids in error texts are replaced with {@code <T0>}, {@code <T1>}... so that runs
 * on different brokers compare. Producers and consumers are left to the end of the process.
 */
final class CoordinatorScenarios {

    private static final long WAIT_SECONDS = 15;

    private final PulsarClient client;
    private final Map<String, Object> obs;
    private final List<TxnID> named = new ArrayList<>();

    CoordinatorScenarios(PulsarClient client, Map<String, Object> obs) {
        this.client = client;
        this.obs = obs;
    }

    /** A step whose failure is an observation. */
    @FunctionalInterface
    interface Step {
        void run() throws Exception;
    }

    /**
     * {@code late_send_after_timeout}: a txn with a 2 s timeout sends t-0 and times out. Its client-side state is
     * forced back to OPEN (as Pulsar's own tests do) and it sends again: the send is accepted, and neither message
     * is ever delivered, while a plain message sent afterwards is. Then a later txn of the same coordinator commits
     * on the topic; its end names a low-water mark past the timed-out txn, whose next send is refused.
     */
    void lateSendAfterTimeout(String topic) throws Exception {
        Consumer<byte[]> consumer = consumer(topic);
        Producer<byte[]> producer = producer(topic);
        Transaction txn = newTxn(2000);
        name(txn.getTxnID());
        send(producer, txn, "t-0");
        Thread.sleep(3500);
        obs.put("client_state", ((TransactionImpl) txn).getState().name());
        forceOpen(txn);
        obs.put("late_send_error", outcome(() -> send(producer, txn, "late")));
        send(producer, null, "p-0");
        obs.put("received", texts(receive(consumer, 3, 5000)));
        Transaction later = sameCoordinator(txn.getTxnID());
        obs.put("later_found", later != null);
        if (later == null) {
            return;
        }
        send(producer, later, "later");
        obs.put("later_commit_error", outcome(() -> later.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("send_below_low_water_mark_error", outcome(() -> send(producer, txn, "too-late")));
        obs.put("received_after", texts(receive(consumer, 2, 5000)));
    }

    /**
     * {@code end_errors}: END_TXN answers, texts included: ends of a committed txn and of an unknown one; a txn
     * with timeout 0 and one with timeout -1 ms, each ended by the coordinator client at once (abort, then commit)
     * and again a second later; a commit and an abort through the client API after a timeout of 0.
     */
    void endErrors() throws Exception {
        Transaction committed = newTxn(60_000);
        name(committed.getTxnID());
        obs.put("commit_error", outcome(() -> committed.commit().get(WAIT_SECONDS, SECONDS)));
        obs.put("commit_again_error", outcome(() -> tc().commitAsync(committed.getTxnID()).get(WAIT_SECONDS,
                SECONDS)));
        obs.put("abort_committed_error", outcome(() -> tc().abortAsync(committed.getTxnID()).get(WAIT_SECONDS,
                SECONDS)));
        TxnID unknown = new TxnID(committed.getTxnID().getMostSigBits(),
                committed.getTxnID().getLeastSigBits() + 1_000_000);
        name(unknown);
        obs.put("commit_unknown_error", outcome(() -> tc().commitAsync(unknown).get(WAIT_SECONDS, SECONDS)));
        for (long timeoutMs : new long[] {0, -1}) {
            Map<String, Object> ends = new LinkedHashMap<>();
            TxnID aborted = newTxn(timeoutMs).getTxnID();
            name(aborted);
            ends.put("abort_at_once", outcome(() -> tc().abortAsync(aborted).get(WAIT_SECONDS, SECONDS)));
            TxnID committing = newTxn(timeoutMs).getTxnID();
            name(committing);
            ends.put("commit_at_once", outcome(() -> tc().commitAsync(committing).get(WAIT_SECONDS, SECONDS)));
            Thread.sleep(1000);
            ends.put("abort_later", outcome(() -> tc().abortAsync(aborted).get(WAIT_SECONDS, SECONDS)));
            ends.put("commit_later", outcome(() -> tc().commitAsync(committing).get(WAIT_SECONDS, SECONDS)));
            obs.put("timeout_" + timeoutMs, ends);
        }
        Transaction zero = newTxn(0);
        name(zero.getTxnID());
        Thread.sleep(500);
        obs.put("client_abort_after_timeout_0", type(outcome(() -> zero.abort().get(WAIT_SECONDS, SECONDS))));
        obs.put("client_commit_after_timeout_0", type(outcome(() -> zero.commit().get(WAIT_SECONDS, SECONDS))));
    }

    /**
     * {@code missing_namespace_end}: a txn registers a partition of a namespace that does not exist (through the
     * coordinator client: producers cannot be created there), then commits, commits again and aborts.
     */
    void missingNamespaceEnd(String topic) throws Exception {
        Transaction txn = newTxn(60_000);
        name(txn.getTxnID());
        obs.put("add_partition_error", outcome(() -> tc().addPublishPartitionToTxnAsync(txn.getTxnID(),
                List.of(topic)).get(WAIT_SECONDS, SECONDS)));
        obs.put("commit_error", outcome(() -> tc().commitAsync(txn.getTxnID()).get(WAIT_SECONDS, SECONDS)));
        obs.put("commit_again_error", outcome(() -> tc().commitAsync(txn.getTxnID()).get(WAIT_SECONDS, SECONDS)));
        obs.put("abort_error", outcome(() -> tc().abortAsync(txn.getTxnID()).get(WAIT_SECONDS, SECONDS)));
    }

    // ---------------------------------------------------------------- helpers

    /** A txn on the coordinator of {@code txn}, opening (and aborting) others until the client picks it. */
    private Transaction sameCoordinator(TxnID txn) throws Exception {
        for (int i = 0; i < 64; i++) {
            Transaction next = newTxn(60_000);
            if (next.getTxnID().getMostSigBits() == txn.getMostSigBits()) {
                name(next.getTxnID());
                return next;
            }
            next.abort().get(WAIT_SECONDS, SECONDS);
        }
        return null;
    }

    /** Sets the client-side state of a transaction back to OPEN, whatever the enum of this client release. */
    private static void forceOpen(Transaction txn) throws ReflectiveOperationException {
        Field state = TransactionImpl.class.getDeclaredField("state");
        state.setAccessible(true);
        for (Object constant : state.getType().getEnumConstants()) {
            if (((Enum<?>) constant).name().equals("OPEN")) {
                state.set(txn, constant);
            }
        }
    }

    private Transaction newTxn(long timeoutMs) throws Exception {
        return client.newTransaction().withTransactionTimeout(timeoutMs, MILLISECONDS).build()
                .get(WAIT_SECONDS, SECONDS);
    }

    private TransactionCoordinatorClientImpl tc() {
        return ((PulsarClientImpl) client).getTcClient();
    }

    private void name(TxnID txn) {
        named.add(txn);
    }

    private Producer<byte[]> producer(String topic) throws Exception {
        Producer<byte[]> producer = client.newProducer().topic(topic).sendTimeout(0, SECONDS).enableBatching(false)
                .create();
        return producer;
    }

    private Consumer<byte[]> consumer(String topic) throws Exception {
        Consumer<byte[]> consumer = client.newConsumer().topic(topic).subscriptionName("sub")
                .subscriptionType(SubscriptionType.Exclusive)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
        return consumer;
    }

    private static void send(Producer<byte[]> producer, Transaction txn, String payload) throws Exception {
        (txn == null ? producer.newMessage() : producer.newMessage(txn)).value(payload.getBytes(UTF_8)).sendAsync()
                .get(WAIT_SECONDS, SECONDS);
    }

    private static List<Message<byte[]>> receive(Consumer<byte[]> consumer, int count, long timeoutMs)
            throws Exception {
        List<Message<byte[]>> received = new ArrayList<>();
        long deadline = System.nanoTime() + timeoutMs * 1_000_000;
        while (received.size() < count) {
            long left = (deadline - System.nanoTime()) / 1_000_000;
            Message<byte[]> msg = left > 0 ? consumer.receive((int) left, MILLISECONDS) : null;
            if (msg == null) {
                break;
            }
            received.add(msg);
        }
        return received;
    }

    private static List<String> texts(List<Message<byte[]>> messages) {
        List<String> out = new ArrayList<>();
        messages.forEach(m -> out.add(new String(m.getValue(), UTF_8)));
        return out;
    }

    /** Null when the step succeeded, else {error: simple class name, text: its message with txn ids named}. */
    private Map<String, Object> outcome(Step step) {
        try {
            step.run();
            return null;
        } catch (Exception e) {
            Map<String, Object> described = Scenarios.describe(e);
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("error", described.get("type"));
            out.put("text", anonymise(String.valueOf(described.get("message"))));
            return out;
        }
    }

    private static Object type(Map<String, Object> outcome) {
        return outcome == null ? null : outcome.get("error");
    }

    private String anonymise(String text) {
        String out = text;
        for (int i = 0; i < named.size(); i++) {
            TxnID id = named.get(i);
            String most = Long.toString(id.getMostSigBits());
            String least = Long.toString(id.getLeastSigBits());
            out = out.replace("(" + most + "," + least + ")", "<T" + i + ">")
                    .replace(most + ":" + least, "<T" + i + ">");
        }
        return out;
    }
}
