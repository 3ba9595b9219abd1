package dev.pulsartxnproxy;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.SECONDS;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiFunction;
import java.util.function.Supplier;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;

/**
 * The transaction load generator behind {@code bench/txn.py}; prints one JSON line of figures.
 *
 * <ul>
 *   <li>{@code throughput <url> <topic> <clients> <seconds> <warmupSeconds>}: one PulsarClient and loop per
 *       client, each looping newTransaction, send 1 message, commit; committed transactions per second.</li>
 *   <li>{@code load <url> <topic> <clients> <messages> <phaseSeconds> <rounds> <batched|unbatched> [serverPid]}:
 *       the same loops with {@code messages} per unit, alternating between phases of plain units (send, wait for
 *       the receipts) and transactional ones on the same clients, {@code rounds} of each; message rates per phase
 *       and the median of the rounds' ratios plain/transactional. Given the server's process id (on Linux), also
 *       each phase's units and the CPU time the server spent in it, in clock ticks.</li>
 *   <li>{@code cost <url> <topic> <messages> <repetitions> <batched|unbatched>}: the time to send {@code messages}
 *       messages and wait for their receipts, plainly and inside one transaction (open, send, commit), alternating,
 *       on one client; medians and their ratio.</li>
 * </ul>
 */
public final class TxnBench {

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final byte[] PAYLOAD = "x".repeat(100).getBytes(UTF_8);
    private static final long TXN_TIMEOUT_SECONDS = 60;
    private static final int WARMING_UP = 0;
    private static final int MEASURING = 1;
    private static final int DONE = 2;

    private TxnBench() {
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length < 2) {
            System.err.println("usage: TxnBench throughput|cost <serviceUrl> ...");
            System.exit(2);
        }
        List<String> args = Arrays.asList(argv).subList(2, argv.length);
        Map<String, Object> result = switch (argv[0]) {
            case "throughput" -> throughput(argv[1], args.get(0), Integer.parseInt(args.get(1)),
                    Double.parseDouble(args.get(2)), Double.parseDouble(args.get(3)));
            case "load" -> load(argv[1], args.get(0), Integer.parseInt(args.get(1)), Integer.parseInt(args.get(2)),
                    Double.parseDouble(args.get(3)), Integer.parseInt(args.get(4)), args.get(5).equals("batched"),
                    args.size() > 6 ? Long.parseLong(args.get(6)) : 0);
            case "cost" -> cost(argv[1], args.get(0), Integer.parseInt(args.get(1)), Integer.parseInt(args.get(2)),
                    args.get(3).equals("batched"));
            default -> throw new IllegalArgumentException("unknown mode " + argv[0]);
        };
        System.out.println(JSON.writeValueAsString(result));
        System.out.flush();
        System.exit(0);
    }

    private static PulsarClient client(String url) throws PulsarClientException {
        return PulsarClient.builder()
                .serviceUrl(url)
                .enableTransaction(true)
                .operationTimeout(30, SECONDS)
                .build();
    }

    private static Producer<byte[]> producer(PulsarClient client, String topic, boolean batched)
            throws PulsarClientException {
        return client.newProducer()
                .topic(topic)
                .enableBatching(batched)
                .batchingMaxMessages(1000)
                .batchingMaxPublishDelay(1, TimeUnit.MILLISECONDS)
                .maxPendingMessages(10_000)
                .blockIfQueueFull(true)
                .sendTimeout(0, SECONDS)
                .create();
    }

    /**
     * Committed transactions per second with {@code clients} concurrent loops of open, send 1, commit. Each loop
     * has one transaction at a time and chains its steps on its client's own threads, as pulsar-perf does, so the
     * load generator spends no thread hand-off per step on the cores it shares with the server.
     */
    private static Map<String, Object> throughput(String url, String topic, int clients, double seconds,
            double warmupSeconds) throws Exception {
        Loops loops = new Loops(url, topic, clients, false,
                (client, producer) -> () -> inOneTransaction(client, producer, 1));
        Thread.sleep((long) (warmupSeconds * 1000));
        loops.phase.set(MEASURING);
        long started = System.nanoTime();
        Thread.sleep((long) (seconds * 1000));
        loops.phase.set(DONE);
        long committed = loops.measured.get();
        long elapsed = System.nanoTime() - started;
        List<Long> latencies = loops.stop();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("clients", clients);
        out.put("seconds", elapsed / 1e9);
        out.put("committed", committed);
        out.put("txn_per_second", committed / (elapsed / 1e9));
        out.put("latency_p50_ms", percentile(latencies, 0.50));
        out.put("latency_p99_ms", percentile(latencies, 0.99));
        out.put("failed", loops.failed.get());
        out.put("first_error", loops.firstError.get());
        return out;
    }

    /**
     * Messages per second of {@code clients} loops sending {@code messages} per unit, alternating between plain
     * and transactional phases on the same clients, so that both kinds meet the same machine.
     */
    private static Map<String, Object> load(String url, String topic, int clients, int messages, double phaseSeconds,
            int rounds, boolean batched, long serverPid) throws Exception {
        AtomicBoolean transactional = new AtomicBoolean();
        Loops loops = new Loops(url, topic, clients, batched, (client, producer) -> () -> transactional.get()
                ? inOneTransaction(client, producer, messages) : plainly(producer, messages));
        Thread.sleep(1500);
        transactional.set(true);
        Thread.sleep(1500);
        List<Phase> plain = new ArrayList<>();
        List<Phase> txn = new ArrayList<>();
        for (int round = 0; round < rounds; round++) {
            plain.add(phase(false, transactional, loops, phaseSeconds, serverPid));
            txn.add(phase(true, transactional, loops, phaseSeconds, serverPid));
        }
        loops.phase.set(DONE);
        loops.stop();
        List<Double> ratios = new ArrayList<>();
        for (int round = 0; round < rounds; round++) {
            ratios.add(plain.get(round).unitsPerSecond() / txn.get(round).unitsPerSecond());
        }
        List<Double> sorted = new ArrayList<>(ratios);
        sorted.sort(null);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("clients", clients);
        out.put("messages", messages);
        out.put("batched", batched);
        out.put("plain_msg_per_second", plain.stream().map(phase -> phase.unitsPerSecond() * messages).toList());
        out.put("txn_msg_per_second", txn.stream().map(phase -> phase.unitsPerSecond() * messages).toList());
        out.put("ratios", ratios);
        out.put("ratio", sorted.get(sorted.size() / 2));
        if (serverPid > 0) {
            out.put("plain_phases", plain);
            out.put("txn_phases", txn);
        }
        out.put("failed", loops.failed.get());
        out.put("first_error", loops.firstError.get());
        return out;
    }

    /** What one phase of {@link #load} measured: its units, their rate, and the server's CPU ticks meanwhile. */
    private record Phase(long units, double unitsPerSecond, long serverTicks) {
    }

    /** One measured phase of {@link #load}: units of one kind, after the other kind's units ended. */
    private static Phase phase(boolean kind, AtomicBoolean transactional, Loops loops, double seconds,
            long serverPid) throws Exception {
        loops.phase.set(WARMING_UP);
        transactional.set(kind);
        Thread.sleep(500);
        loops.measured.set(0);
        long ticks = cpuTicks(serverPid);
        loops.phase.set(MEASURING);
        long started = System.nanoTime();
        Thread.sleep((long) (seconds * 1000));
        long units = loops.measured.get();
        long elapsed = System.nanoTime() - started;
        ticks = cpuTicks(serverPid) - ticks;
        loops.phase.set(WARMING_UP);
        return new Phase(units, units / (elapsed / 1e9), ticks);
    }

    /** User plus system CPU time of a process, in clock ticks, from /proc (0 without a process id). */
    private static long cpuTicks(long pid) throws IOException {
        if (pid <= 0) {
            return 0;
        }
        String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
        // The fields after the command name, which is in parentheses and may hold spaces: utime and stime are the
        // 14th and 15th fields of the line, the 12th and 13th after the name.
        String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return Long.parseLong(fields[11]) + Long.parseLong(fields[12]);
    }

    /**
     * {@code clients} loops, each on a client and producer of its own, started at once and sharing the phase
     * (WARMING_UP, MEASURING, DONE) and the counters.
     */
    private static final class Loops {
        final AtomicInteger phase = new AtomicInteger(WARMING_UP);
        /** Units that ended while MEASURING. */
        final AtomicLong measured = new AtomicLong();
        final AtomicLong failed = new AtomicLong();
        final AtomicReference<String> firstError = new AtomicReference<>();
        private final List<TxnLoop> loops = new ArrayList<>();

        Loops(String url, String topic, int clients, boolean batched,
                BiFunction<PulsarClient, Producer<byte[]>, Supplier<CompletableFuture<Void>>> unit)
                throws PulsarClientException {
            for (int i = 0; i < clients; i++) {
                PulsarClient client = client(url);
                loops.add(new TxnLoop(unit.apply(client, producer(client, topic, batched)), this));
            }
            loops.forEach(TxnLoop::next);
        }

        /** Wait for every loop to stop (set the phase to DONE first); the measured latencies, sorted. */
        List<Long> stop() throws Exception {
            List<Long> all = new ArrayList<>();
            for (TxnLoop loop : loops) {
                loop.stopped.get(60, SECONDS);
                all.addAll(loop.samples);
            }
            all.sort(null);
            return all;
        }
    }

    /** One client's loop: run a unit (a transaction, or plain sends), again until the phase is DONE. */
    private static final class TxnLoop {
        private final Supplier<CompletableFuture<Void>> unit;
        private final Loops shared;
        /** Latencies of the measured units, in nanoseconds (one step runs at a time: no locking). */
        final List<Long> samples = new ArrayList<>();
        final CompletableFuture<Void> stopped = new CompletableFuture<>();

        TxnLoop(Supplier<CompletableFuture<Void>> unit, Loops shared) {
            this.unit = unit;
            this.shared = shared;
        }

        void next() {
            int state = shared.phase.get();
            if (state == DONE) {
                stopped.complete(null);
                return;
            }
            long began = System.nanoTime();
            unit.get()
                    .whenComplete((ignored, error) -> {
                        if (error != null) {
                            shared.failed.incrementAndGet();
                            shared.firstError.compareAndSet(null, Scenarios.describe(error).toString());
                        } else if (state == MEASURING && shared.phase.get() == MEASURING) {
                            shared.measured.incrementAndGet();
                            samples.add(System.nanoTime() - began);
                        }
                        next();
                    });
        }
    }

    /** Time per {@code messages} messages sent plainly and in one transaction, alternating, on one client. */
    private static Map<String, Object> cost(String url, String topic, int messages, int repetitions,
            boolean batched) throws Exception {
        PulsarClient client = client(url);
        Producer<byte[]> producer = producer(client, topic, batched);
        List<Long> plain = new ArrayList<>();
        List<Long> inTxn = new ArrayList<>();
        int warmup = Math.max(5, repetitions / 10);
        for (int rep = 0; rep < warmup + repetitions; rep++) {
            // Alternate which goes first, so that neither always follows the other's commit.
            boolean txnFirst = rep % 2 == 1;
            long a = txnFirst ? timeTxn(client, producer, messages) : timePlain(producer, messages);
            long b = txnFirst ? timePlain(producer, messages) : timeTxn(client, producer, messages);
            if (rep >= warmup) {
                plain.add(txnFirst ? b : a);
                inTxn.add(txnFirst ? a : b);
            }
        }
        plain.sort(null);
        inTxn.sort(null);
        double plainMedian = percentile(plain, 0.5);
        double txnMedian = percentile(inTxn, 0.5);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("messages", messages);
        out.put("repetitions", repetitions);
        out.put("batched", batched);
        out.put("plain_median_ms", plainMedian);
        out.put("plain_p90_ms", percentile(plain, 0.9));
        out.put("txn_median_ms", txnMedian);
        out.put("txn_p90_ms", percentile(inTxn, 0.9));
        out.put("ratio", txnMedian / plainMedian);
        return out;
    }

    private static long timePlain(Producer<byte[]> producer, int messages) throws Exception {
        long began = System.nanoTime();
        plainly(producer, messages).get(60, SECONDS);
        return System.nanoTime() - began;
    }

    /** Send {@code messages} messages without a transaction; complete once every receipt arrived. */
    private static CompletableFuture<Void> plainly(Producer<byte[]> producer, int messages) {
        List<CompletableFuture<MessageId>> sends = new ArrayList<>(messages);
        for (int i = 0; i < messages; i++) {
            sends.add(producer.newMessage().value(PAYLOAD).sendAsync());
        }
        producer.flushAsync();
        return CompletableFuture.allOf(sends.toArray(CompletableFuture[]::new));
    }

    /** Open, send, commit, waiting once at the end, the way the plain path sends and then waits. */
    private static long timeTxn(PulsarClient client, Producer<byte[]> producer, int messages) throws Exception {
        long began = System.nanoTime();
        inOneTransaction(client, producer, messages).get(60, SECONDS);
        return System.nanoTime() - began;
    }

    /**
     * Open a transaction, send {@code messages} messages in it and commit, as one asynchronous chain: the steps run
     * on the client's own threads as each answer arrives, not after a hop back to the caller's thread.
     */
    private static CompletableFuture<Void> inOneTransaction(PulsarClient client, Producer<byte[]> producer,
            int messages) {
        return client.newTransaction().withTransactionTimeout(TXN_TIMEOUT_SECONDS, SECONDS).build()
                .thenCompose(txn -> {
                    for (int i = 0; i < messages; i++) {
                        producer.newMessage(txn).value(PAYLOAD).sendAsync();
                    }
                    producer.flushAsync();
                    return txn.commit();
                });
    }

    /** The {@code q} quantile of sorted nanosecond samples, in milliseconds (null without samples). */
    private static Double percentile(List<Long> sorted, double q) {
        if (sorted.isEmpty()) {
            return null;
        }
        int index = Math.min(sorted.size() - 1, (int) Math.floor(q * sorted.size()));
        return sorted.get(index) / 1e6;
    }
}
