package dev.pulsartxnproxy;

import static java.util.concurrent.TimeUnit.SECONDS;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.impl.ProducerImpl;

/**
 * The broker's max message size as the Java client uses it: it reads it from CONNECTED, fills batches up to it (with
 * no byte bound of its own), refuses a larger message and splits one into chunks of it when chunking is on.
 */
final class MessageSizeScenarios {

    private static final long WAIT_SECONDS = 30;

    private final PulsarClient client;
    private final Map<String, Object> obs;

    MessageSizeScenarios(PulsarClient client, Map<String, Object> obs) {
        this.client = client;
        this.obs = obs;
    }

    /**
     * {@code max_size_batches <topic> <messageBytes> <count>}: a batching producer bounded by the max message size
     * alone sends {@code count} messages of {@code messageBytes}; then a message one byte over the max message size
     * without chunking, and one of two and a half times it with chunking, which a consumer receives whole.
     */
    void maxSizeBatches(String topic, int messageBytes, int count) throws Exception {
        try (Consumer<byte[]> consumer = client.newConsumer().topic(topic).subscriptionName("sub")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
             Producer<byte[]> batched = client.newProducer().topic(topic).enableBatching(true)
                     .batchingMaxMessages(count).batchingMaxBytes(0).batchingMaxPublishDelay(10, SECONDS).create();
             Producer<byte[]> plain = client.newProducer().topic(topic).enableBatching(false).create();
             Producer<byte[]> chunked = client.newProducer().topic(topic).enableBatching(false)
                     .enableChunking(true).create()) {
            int max = ((ProducerImpl<byte[]>) plain).getConnectionHandler().getMaxMessageSize();
            obs.put("advertised", max);
            List<CompletableFuture<MessageId>> sends = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                byte[] payload = new byte[messageBytes];
                Arrays.fill(payload, (byte) i);
                sends.add(batched.sendAsync(payload));
            }
            batched.flush();
            TreeSet<Long> entries = new TreeSet<>();
            int largest = 0;
            for (CompletableFuture<MessageId> send : sends) {
                MessageIdAdv id = (MessageIdAdv) send.get(WAIT_SECONDS, SECONDS);
                entries.add(id.getEntryId());
                largest = Math.max(largest, id.getBatchIndex() + 1);
            }
            obs.put("batches", entries.size());
            obs.put("largest_batch", largest);
            obs.put("too_big", Scenarios.describe(catching(() -> plain.send(new byte[max + 1]))));
            byte[] big = new byte[max * 5 / 2];
            for (int i = 0; i < big.length; i++) {
                big[i] = (byte) (i % 251);
            }
            chunked.send(big);
            List<Message<byte[]>> received = Scenarios.receive(consumer, count + 1, 20_000);
            obs.put("received", received.size());
            obs.put("chunked_whole", !received.isEmpty()
                    && Arrays.equals(received.get(received.size() - 1).getValue(), big));
        }
    }

    private static Throwable catching(Scenarios.Step step) {
        try {
            step.run();
            return new AssertionError("no exception");
        } catch (Exception e) {
            return e;
        }
    }
}
