package dev.pulsartxnproxy.conformance;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * A randomized transaction workload in the Jepsen style: it records a history and never judges it (the Python
 * checker, tests/conformance/checker.py, does).
 *
 * <p>Writers run transactions that send 1-4 messages to random partitions of several partitioned topics and then
 * commit, abort or abandon them (left to time out); some sends are plain. Consume-process-produce workers read an
 * input topic on a Shared subscription and, in one transaction, produce a derived message and acknowledge the input.
 * Live consumers read every topic while this happens. At the end abandoned transactions are given time to time out,
 * a sentinel is sent to every partition, and a fresh subscription reads each partition to its sentinel.
 *
 * <p>Every event is one JSON line in the history file; times are nanoseconds since the start, from one clock.
 * Usage: {@code Workload --service-url URL --topics a,b --output o --input i --partitions N --seed S --seconds D
 * --writers W --cpp-workers C --inputs N --txn-timeout-ms T --history FILE}.
 */
public final class Workload {

    private static final long WAIT_SECONDS = 20;
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Map<String, String> cfg;
    private final PulsarClient client;
    private final long started = System.nanoTime();
    private final BufferedWriter history;
    private final AtomicBoolean stopWork = new AtomicBoolean();
    private final AtomicBoolean stopLive = new AtomicBoolean();
    private final List<String> topics;
    private final int partitions;
    private final long seed;
    private final long txnTimeoutMs;
    /** Sentinels seen by the live consumers, per topic. */
    private final Map<String, Set<String>> liveSentinels = new HashMap<>();

    private Workload(Map<String, String> cfg) throws Exception {
        this.cfg = cfg;
        this.topics = List.of(cfg.get("topics").split(","));
        this.partitions = Integer.parseInt(cfg.get("partitions"));
        this.seed = Long.parseLong(cfg.get("seed"));
        this.txnTimeoutMs = Long.parseLong(cfg.get("txn-timeout-ms"));
        this.history = Files.newBufferedWriter(Path.of(cfg.get("history")), UTF_8);
        this.client = PulsarClient.builder()
                .serviceUrl(cfg.get("service-url"))
                .enableTransaction(true)
                .operationTimeout(10, SECONDS)
                .build();
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> cfg = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            cfg.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        Workload workload = new Workload(cfg);
        int code = 0;
        try {
            workload.run();
        } catch (Exception e) {
            workload.event(Map.of("type", "error", "phase", "run", "error", describe(e)));
            code = 1;
        } finally {
            workload.history.close();
        }
        Runtime.getRuntime().halt(code);
    }

    private void run() throws Exception {
        String input = cfg.get("input");
        String output = cfg.get("output");
        List<String> readTopics = new ArrayList<>(topics);
        readTopics.add(output);
        event(Map.of("type", "start", "topics", topics, "output", output, "input", input, "partitions", partitions,
                "seed", seed, "txn_timeout_ms", txnTimeoutMs));
        seedInputs(input, Integer.parseInt(cfg.get("inputs")));
        List<Thread> live = new ArrayList<>();
        for (String topic : readTopics) {
            liveSentinels.put(topic, ConcurrentHashMap.newKeySet());
            live.add(start("live-" + topic, () -> liveReader(topic)));
        }
        List<Thread> workers = new ArrayList<>();
        for (int w = 0; w < Integer.parseInt(cfg.get("writers")); w++) {
            int id = w;
            workers.add(start("writer-" + w, () -> writer(id)));
        }
        for (int c = 0; c < Integer.parseInt(cfg.get("cpp-workers")); c++) {
            int id = c;
            workers.add(start("cpp-" + c, () -> consumeProcessProduce(id, input, output)));
        }
        Thread.sleep(Long.parseLong(cfg.get("seconds")) * 1000);
        stopWork.set(true);
        event(Map.of("type", "stop"));
        for (Thread t : workers) {
            t.join();
        }
        event(Map.of("type", "workers_done"));
        // Abandoned transactions time out (the coordinator aborts them); then sentinels prove every partition flows.
        Thread.sleep(txnTimeoutMs + 2000);
        sendSentinels(readTopics);
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (System.nanoTime() < deadline && !allSentinelsSeen(readTopics)) {
            Thread.sleep(100);
        }
        stopLive.set(true);
        for (Thread t : live) {
            t.join();
        }
        for (String topic : readTopics) {
            for (int p = 0; p < partitions; p++) {
                finalRead(topic, p);
            }
        }
        event(Map.of("type", "end"));
        client.close();
    }

    // ---------------------------------------------------------------- roles

    private void seedInputs(String input, int count) throws Exception {
        Producer<byte[]> producer = producer(input, "seed");
        List<CompletableFuture<MessageId>> sends = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            sends.add(producer.newMessage().key("k" + (i % 16)).value(("in-" + i).getBytes(UTF_8)).sendAsync());
        }
        for (int i = 0; i < count; i++) {
            Map<String, Object> ev = new LinkedHashMap<>();
            ev.put("type", "plain");
            ev.put("v", "in-" + i);
            ev.put("topic", input);
            recordSend(ev, sends.get(i));
            event(ev);
        }
    }

    private void writer(int id) {
        Random rnd = new Random(seed * 1_000_003L + id);
        Map<String, Producer<byte[]>> producers = new HashMap<>();
        long seq = 0;
        int txnCount = 0;
        try {
            for (String topic : topics) {
                producers.put(topic, producer(topic, "w" + id));
            }
            while (!stopWork.get()) {
                if (rnd.nextDouble() < 0.1) {
                    String topic = topics.get(rnd.nextInt(topics.size()));
                    String value = "w" + id + "-" + seq++;
                    Map<String, Object> ev = new LinkedHashMap<>();
                    ev.put("type", "plain");
                    ev.put("v", value);
                    ev.put("topic", topic);
                    ev.put("writer", "w" + id);
                    recordSend(ev, producers.get(topic).newMessage().key("k" + rnd.nextInt(16))
                            .value(value.getBytes(UTF_8)).sendAsync());
                    event(ev);
                } else {
                    String label = "w" + id + "-t" + txnCount++;
                    Map<String, Object> ev = new LinkedHashMap<>();
                    ev.put("type", "txn");
                    ev.put("kind", "produce");
                    ev.put("id", label);
                    ev.put("writer", "w" + id);
                    Transaction txn = openTxn(ev);
                    if (txn == null) {
                        continue;
                    }
                    int count = 1 + rnd.nextInt(4);
                    List<Map<String, Object>> msgs = new ArrayList<>();
                    List<CompletableFuture<MessageId>> sends = new ArrayList<>();
                    for (int i = 0; i < count; i++) {
                        String topic = topics.get(rnd.nextInt(topics.size()));
                        String value = "w" + id + "-" + seq++;
                        Map<String, Object> m = new LinkedHashMap<>();
                        m.put("v", value);
                        m.put("topic", topic);
                        msgs.add(m);
                        sends.add(producers.get(topic).newMessage(txn).key("k" + rnd.nextInt(16))
                                .value(value.getBytes(UTF_8)).sendAsync());
                    }
                    for (int i = 0; i < count; i++) {
                        recordSend(msgs.get(i), sends.get(i));
                    }
                    ev.put("msgs", msgs);
                    end(ev, txn, plan(rnd, 0.65, 0.25));
                }
                Thread.sleep(rnd.nextInt(10));
            }
        } catch (Exception e) {
            event(Map.of("type", "error", "phase", "writer-" + id, "error", describe(e)));
        }
    }

    private void consumeProcessProduce(int id, String input, String output) {
        Random rnd = new Random(seed * 7_919L + 100 + id);
        int txnCount = 0;
        try {
            Consumer<byte[]> in = client.newConsumer()
                    .topic(input)
                    .subscriptionName("cpp")
                    .subscriptionType(SubscriptionType.Shared)
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                    .receiverQueueSize(5)
                    .acknowledgmentGroupTime(0, MILLISECONDS)
                    .isAckReceiptEnabled(true)
                    .subscribe();
            Producer<byte[]> out = producer(output, "c" + id);
            while (!stopWork.get()) {
                Message<byte[]> msg = in.receive(300, MILLISECONDS);
                if (msg == null) {
                    continue;
                }
                String inValue = new String(msg.getValue(), UTF_8);
                String label = "c" + id + "-t" + txnCount++;
                Map<String, Object> ev = new LinkedHashMap<>();
                ev.put("type", "txn");
                ev.put("kind", "cpp");
                ev.put("id", label);
                ev.put("writer", "c" + id);
                Map<String, Object> ack = new LinkedHashMap<>();
                ack.put("v", inValue);
                ack.put("mid", msg.getMessageId().toString());
                ack.put("redelivery", msg.getRedeliveryCount());
                ack.put("t_read", now());
                ev.put("acks", List.of(ack));
                Transaction txn = openTxn(ev);
                if (txn == null) {
                    in.negativeAcknowledge(msg);
                    continue;
                }
                String outValue = "o:" + inValue + ":" + label;
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("v", outValue);
                m.put("topic", output);
                recordSend(m, out.newMessage(txn).key(inValue).value(outValue.getBytes(UTF_8)).sendAsync());
                ev.put("msgs", List.of(m));
                ack.put("error", outcome(() -> in.acknowledgeAsync(msg.getMessageId(), txn)
                        .get(WAIT_SECONDS, SECONDS)));
                end(ev, txn, plan(rnd, 0.7, 0.2));
            }
            in.close();
        } catch (Exception e) {
            event(Map.of("type", "error", "phase", "cpp-" + id, "error", describe(e)));
        }
    }

    private void liveReader(String topic) {
        try {
            Consumer<byte[]> consumer = client.newConsumer()
                    .topic(topic)
                    .subscriptionName("live")
                    .subscriptionType(SubscriptionType.Exclusive)
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                    .acknowledgmentGroupTime(0, MILLISECONDS)
                    .subscribe();
            while (!stopLive.get()) {
                Message<byte[]> msg = consumer.receive(200, MILLISECONDS);
                if (msg == null) {
                    continue;
                }
                String value = new String(msg.getValue(), UTF_8);
                Map<String, Object> ev = new LinkedHashMap<>();
                ev.put("type", "read");
                ev.put("reader", "live");
                ev.put("v", value);
                ev.put("topic", msg.getTopicName());
                ev.put("mid", msg.getMessageId().toString());
                ev.put("redelivery", msg.getRedeliveryCount());
                event(ev);
                if (value.startsWith("sentinel:")) {
                    liveSentinels.get(topic).add(value);
                }
                consumer.acknowledgeAsync(msg);
            }
            consumer.close();
        } catch (Exception e) {
            event(Map.of("type", "error", "phase", "live-" + topic, "error", describe(e)));
        }
    }

    private void sendSentinels(List<String> readTopics) throws Exception {
        for (String topic : readTopics) {
            for (int p = 0; p < partitions; p++) {
                String partition = topic + "-partition-" + p;
                Producer<byte[]> producer = producer(partition, "sentinel-" + p);
                String value = "sentinel:" + topic + ":" + p;
                Map<String, Object> ev = new LinkedHashMap<>();
                ev.put("type", "plain");
                ev.put("v", value);
                ev.put("topic", topic);
                recordSend(ev, producer.newMessage().value(value.getBytes(UTF_8)).sendAsync());
                event(ev);
                producer.close();
            }
        }
    }

    private boolean allSentinelsSeen(List<String> readTopics) {
        for (String topic : readTopics) {
            if (liveSentinels.get(topic).size() < partitions) {
                return false;
            }
        }
        return true;
    }

    /** A fresh subscription reads one partition from the start to its sentinel. */
    private void finalRead(String topic, int p) throws Exception {
        String partition = topic + "-partition-" + p;
        Consumer<byte[]> consumer = client.newConsumer()
                .topic(partition)
                .subscriptionName("final")
                .subscriptionType(SubscriptionType.Exclusive)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .receiverQueueSize(1000)
                .subscribe();
        List<String> values = new ArrayList<>();
        List<String> mids = new ArrayList<>();
        String sentinel = "sentinel:" + topic + ":" + p;
        boolean complete = false;
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (System.nanoTime() < deadline) {
            Message<byte[]> msg = consumer.receive(1, SECONDS);
            if (msg == null) {
                continue;
            }
            String value = new String(msg.getValue(), UTF_8);
            values.add(value);
            mids.add(msg.getMessageId().toString());
            if (value.equals(sentinel)) {
                complete = true;
                break;
            }
        }
        // Anything after the sentinel would be a late write: look briefly.
        Message<byte[]> extra;
        while ((extra = consumer.receive(200, MILLISECONDS)) != null) {
            values.add(new String(extra.getValue(), UTF_8));
            mids.add(extra.getMessageId().toString());
        }
        consumer.close();
        Map<String, Object> ev = new LinkedHashMap<>();
        ev.put("type", "final");
        ev.put("topic", topic);
        ev.put("partition", p);
        ev.put("complete", complete);
        ev.put("values", values);
        ev.put("mids", mids);
        event(ev);
    }

    // ---------------------------------------------------------------- transactions

    private static String plan(Random rnd, double commit, double abort) {
        double r = rnd.nextDouble();
        return r < commit ? "commit" : r < commit + abort ? "abort" : "abandon";
    }

    private Transaction openTxn(Map<String, Object> ev) {
        ev.put("t_open", now());
        try {
            Transaction txn = client.newTransaction()
                    .withTransactionTimeout(txnTimeoutMs, MILLISECONDS)
                    .build()
                    .get(WAIT_SECONDS, SECONDS);
            TxnID id = txn.getTxnID();
            ev.put("txnid", id.getMostSigBits() + ":" + id.getLeastSigBits());
            return txn;
        } catch (Exception e) {
            ev.put("outcome", "not_opened");
            ev.put("error", describe(e));
            event(ev);
            return null;
        }
    }

    /** Ends the txn as planned and records the outcome: committed, aborted, abandoned, or unknown (an error). */
    private void end(Map<String, Object> ev, Transaction txn, String plan) {
        ev.put("plan", plan);
        ev.put("t_end_req", now());
        Object error = null;
        String result;
        if (plan.equals("abandon")) {
            result = "abandoned";
        } else {
            error = outcome(() -> (plan.equals("commit") ? txn.commit() : txn.abort()).get(WAIT_SECONDS, SECONDS));
            result = error == null ? (plan.equals("commit") ? "committed" : "aborted") : "unknown";
        }
        ev.put("t_end", now());
        ev.put("outcome", result);
        if (error != null) {
            ev.put("error", error);
        }
        event(ev);
    }

    // ---------------------------------------------------------------- helpers

    private Producer<byte[]> producer(String topic, String name) throws Exception {
        return client.newProducer()
                .topic(topic)
                .producerName(name + "-" + Integer.toHexString(topic.hashCode()))
                .sendTimeout(0, SECONDS)
                .enableBatching(false)
                .blockIfQueueFull(true)
                .create();
    }

    private void recordSend(Map<String, Object> ev, CompletableFuture<MessageId> send) {
        ev.put("t_send", now());
        try {
            MessageId id = send.get(WAIT_SECONDS, SECONDS);
            ev.put("mid", id.toString());
            ev.put("ok", true);
        } catch (Exception e) {
            ev.put("ok", false);
            ev.put("error", describe(e));
        }
        ev.put("t_acked", now());
    }

    private long now() {
        return System.nanoTime() - started;
    }

    private synchronized void event(Map<String, Object> ev) {
        try {
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("t", now());
            line.putAll(ev);
            history.write(JSON.writeValueAsString(line));
            history.newLine();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    private static Thread start(String name, Runnable body) {
        Thread t = new Thread(body, name);
        t.start();
        return t;
    }

    @FunctionalInterface
    private interface Step {
        void run() throws Exception;
    }

    private static Object outcome(Step step) {
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

    private static String describe(Throwable t) {
        Throwable e = t;
        while (e instanceof ExecutionException && e.getCause() != null) {
            e = e.getCause();
        }
        return e.getClass().getSimpleName();
    }
}
