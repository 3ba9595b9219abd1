package dev.pulsartxnproxy;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.impl.ConsumerImpl;
import org.apache.pulsar.client.impl.PulsarClientImpl;

/**
 * A consume-transform-produce exactly-once loop meant to run while the broker is killed and restarted under it.
 *
 * <p>{@code crash_loop <input> <output> <count> <seconds> [flags...]}: sends {@code count} inputs, then, for each
 * message a Failover consumer receives, opens a transaction, sends the transformed message to the output topic and
 * acknowledges the input in it, and commits. A failed step aborts the transaction, as an application would, and the
 * message comes again: the broker redelivers what an abort releases, and a consumer that reconnects after a crash
 * gets everything not acknowledged. The loop ends once every input was committed, when a {@code stop} line comes on
 * stdin (a commit whose answer the crash cut off may have committed: the driver sees the input backlog empty), or
 * after {@code seconds}. A read-back with a fresh
 * subscription on the output then counts distinct outputs and duplicates. Progress goes to stdout as
 * {@code progress <committed>} lines so that a driver can kill the broker at chosen points. Flags: {@code batched}
 * (inputs sent in batches of 100), {@code small_queue} (a receiver queue of 10, smaller than a batch),
 * {@code batch_index_ack} (the consumer acknowledges batch indexes), {@code default_client}
 * (the client builder's defaults instead of short timeouts and reconnection backoffs).
 */
final class LoopScenarios {

    /** Bound on one client future: longer than the operation timeout, so that the client's own timeout fires. */
    private static final long WAIT_SECONDS = 15;
    /** Timeout of each transaction: a transaction the crash cut off ends by itself within it. */
    private static final long TXN_TIMEOUT_SECONDS = 10;
    /** A consumer that gets nothing for this long while inputs are missing is stalled (recorded). */
    private static final long STALL_MS = 3000;
    /** Messages per batch of the inputs ({@code batched}). */
    private static final int BATCH = 100;
    /** The loop consumer's receiver queue with {@code small_queue}: smaller than a batch. */
    private static final int SMALL_QUEUE = 10;
    /** Quiet time that ends the read-back. */
    private static final long QUIET_MS = 2000;

    private final Map<String, Object> obs;
    private final String url;
    private boolean batchIndexAck;
    private int receiverQueue = 1000;

    LoopScenarios(PulsarClient harnessClient, Map<String, Object> obs) {
        this.obs = obs;
        this.url = ((PulsarClientImpl) harnessClient).getConfiguration().getServiceUrl();
    }

    /** A client as an application that must survive broker restarts configures it. */
    private PulsarClient newClient() throws PulsarClientException {
        return HarnessSecurity.apply(PulsarClient.builder()
                .serviceUrl(url)
                .enableTransaction(true)
                .operationTimeout(5, SECONDS)
                .connectionTimeout(2, SECONDS)
                .startingBackoffInterval(100, MILLISECONDS)
                .maxBackoffInterval(1, SECONDS))
                .build();
    }

    void crashLoop(String input, String output, int count, long seconds, Set<String> flags) throws Exception {
        boolean batched = flags.contains("batched");
        batchIndexAck = flags.contains("batch_index_ack");
        if (flags.contains("small_queue")) {
            receiverQueue = SMALL_QUEUE;
        }
        obs.put("inputs", count);
        obs.put("flags", new TreeSet<>(flags));
        try (PulsarClient client = flags.contains("default_client")
                ? HarnessSecurity.apply(PulsarClient.builder().serviceUrl(url).enableTransaction(true)).build()
                : newClient()) {
            produceInputs(client, input, count, batched);
            loop(client, input, output, count, seconds);
            readBack(client, output, count);
        }
    }

    private static void produceInputs(PulsarClient client, String input, int count, boolean batched)
            throws Exception {
        try (Producer<byte[]> producer = client.newProducer().topic(input).sendTimeout(0, SECONDS)
                .enableBatching(batched).batchingMaxMessages(BATCH).batchingMaxPublishDelay(10, SECONDS).create()) {
            for (int i = 0; i < count; i++) {
                producer.sendAsync(("in-" + i).getBytes(UTF_8));
            }
            producer.flush();
        }
        System.out.println("produced " + count);
        System.out.flush();
    }

    private void loop(PulsarClient client, String input, String output, int count, long seconds) throws Exception {
        Consumer<byte[]> consumer = client.newConsumer()
                .topic(input)
                .subscriptionName("loop")
                .subscriptionType(SubscriptionType.Failover)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .enableBatchIndexAcknowledgment(batchIndexAck)
                .receiverQueueSize(receiverQueue)
                .subscribe();
        Producer<byte[]> producer = client.newProducer().topic(output).sendTimeout(0, SECONDS)
                .enableBatching(false).create();
        Set<String> committed = new HashSet<>();
        int deliveries = 0;
        // Inputs delivered again after their transaction committed: copies a reconnect left in the receiver
        // queues (their acks conflict and the loop aborts them), not a fault by themselves.
        int deliveriesOfCommitted = 0;
        Map<String, Integer> failures = new TreeMap<>();
        Map<String, Integer> abortFailures = new TreeMap<>();
        List<Map<String, Object>> stalls = new ArrayList<>();
        long began = System.nanoTime();
        long deadline = began + seconds * 1_000_000_000L;
        long lastReceived = began;
        boolean stalled = false;
        AtomicBoolean stop = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try (BufferedReader lines = new BufferedReader(new InputStreamReader(System.in, UTF_8))) {
                for (String line = lines.readLine(); line != null; line = lines.readLine()) {
                    if (line.strip().equals("stop")) {
                        stop.set(true);
                    }
                }
            } catch (IOException ignored) {
                // No driver: the loop ends on its own.
            }
        });
        stdin.setDaemon(true);
        stdin.start();
        while (committed.size() < count && !stop.get() && System.nanoTime() < deadline) {
            Message<byte[]> msg = consumer.receive(500, MILLISECONDS);
            long now = System.nanoTime();
            if (msg == null) {
                if (!stalled && (now - lastReceived) / 1_000_000 >= STALL_MS) {
                    stalled = true;
                    Map<String, Object> stall = new LinkedHashMap<>();
                    stall.put("committed", committed.size());
                    stall.put("available_permits", permits(consumer));
                    stall.put("connected", consumer.isConnected());
                    stalls.add(stall);
                }
                continue;
            }
            lastReceived = now;
            stalled = false;
            deliveries++;
            String payload = new String(msg.getValue(), UTF_8);
            if (committed.contains(payload)) {
                deliveriesOfCommitted++;
            }
            Transaction txn = null;
            try {
                txn = client.newTransaction().withTransactionTimeout(TXN_TIMEOUT_SECONDS, SECONDS).build()
                        .get(WAIT_SECONDS, SECONDS);
                producer.newMessage(txn).value(("out-" + payload).getBytes(UTF_8)).sendAsync()
                        .get(WAIT_SECONDS, SECONDS);
                consumer.acknowledgeAsync(msg.getMessageId(), txn).get(WAIT_SECONDS, SECONDS);
                txn.commit().get(WAIT_SECONDS, SECONDS);
                committed.add(payload);
                System.out.println("progress " + committed.size());
                System.out.flush();
            } catch (Exception e) {
                failures.merge(Scenarios.describe(e).get("type").toString(), 1, Integer::sum);
                if (txn != null) {
                    try {
                        txn.abort().get(WAIT_SECONDS, SECONDS);
                    } catch (Exception abortError) {
                        abortFailures.merge(Scenarios.describe(abortError).get("type").toString(), 1,
                                Integer::sum);
                    }
                }
            }
        }
        obs.put("loop_ms", (System.nanoTime() - began) / 1_000_000);
        obs.put("committed", committed.size());
        obs.put("deliveries", deliveries);
        obs.put("failures", failures);
        obs.put("abort_failures", abortFailures);
        obs.put("stalls", stalls);
        obs.put("deliveries_of_committed", deliveriesOfCommitted);
        producer.close();
        consumer.close();
    }

    /** A fresh subscription on the output: the committed outputs, each counted once, and the duplicates. */
    private void readBack(PulsarClient client, String output, int count) throws PulsarClientException {
        Set<String> distinct = new HashSet<>();
        int duplicates = 0;
        List<String> duplicated = new ArrayList<>();
        try (Consumer<byte[]> consumer = client.newConsumer()
                .topic(output)
                .subscriptionName("read-back")
                .subscriptionType(SubscriptionType.Exclusive)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .subscribe()) {
            while (true) {
                Message<byte[]> msg = consumer.receive((int) QUIET_MS, MILLISECONDS);
                if (msg == null) {
                    break;
                }
                String payload = new String(msg.getValue(), UTF_8);
                if (!distinct.add(payload)) {
                    duplicates++;
                    if (duplicated.size() < 20) {
                        duplicated.add(payload + "@" + msg.getMessageId());
                    }
                }
            }
        }
        List<String> missing = new ArrayList<>();
        for (int i = 0; i < count && missing.size() < 20; i++) {
            if (!distinct.contains("out-in-" + i)) {
                missing.add("in-" + i);
            }
        }
        obs.put("distinct_outputs", distinct.size());
        obs.put("duplicate_outputs", duplicates);
        obs.put("first_duplicates", duplicated);
        obs.put("first_missing", missing);
    }

    private static int permits(Consumer<byte[]> consumer) {
        return consumer instanceof ConsumerImpl<byte[]> impl ? impl.getAvailablePermits() : -1;
    }
}
