package dev.pulsartxnproxy;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.MINUTES;
import static java.util.concurrent.TimeUnit.SECONDS;

import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.impl.MultiTopicsConsumerImpl;
import org.apache.pulsar.client.impl.PatternMultiTopicsConsumerImpl;

/**
 * Pattern consumers and topic-list watchers (PIP-145): with a broker that announces {@code supports_topic_watchers},
 * the Java client watches the namespace's topic list and subscribes to a new matching topic, or drops a deleted one,
 * as soon as the broker tells it; its periodic re-check is set to ten minutes here, so only the watch can explain it.
 */
final class TopicWatchScenarios {

    private static final long WAIT_MS = 10_000;

    private final PulsarClient client;
    private final Map<String, Object> obs;

    TopicWatchScenarios(PulsarClient client, Map<String, Object> obs) {
        this.client = client;
        this.obs = obs;
    }

    /**
     * {@code pattern_watch <topicBase> <adminUrl>}: {@code <topicBase>-a} exists with a message; a consumer on the
     * pattern {@code <topicBase>-.*} receives it; a producer then creates {@code <topicBase>-b} and sends to it, and
     * an admin call creates the partitioned {@code <topicBase>-c} (two partitions); the consumer subscribes to them
     * and receives; {@code <topicBase>-a} is deleted, and the consumer drops it.
     */
    void patternWatch(String base, String adminUrl) throws Exception {
        try (Producer<byte[]> first = client.newProducer().topic(base + "-a").enableBatching(false).create()) {
            first.send("a0".getBytes(UTF_8));
        }
        Consumer<byte[]> consumer = client.newConsumer().topicsPattern(base + "-.*").subscriptionName("sub")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .patternAutoDiscoveryPeriod(10, MINUTES).subscribe();
        try {
            PatternMultiTopicsConsumerImpl<byte[]> pattern = (PatternMultiTopicsConsumerImpl<byte[]>) consumer;
            obs.put("watcher", outcome(() -> pattern.getWatcherFuture().get(WAIT_MS, MILLISECONDS)));
            obs.put("initial", texts(Scenarios.receive(consumer, 1, WAIT_MS)));
            obs.put("topics_initial", topics(consumer));
            long began = System.nanoTime();
            try (Producer<byte[]> second = client.newProducer().topic(base + "-b").enableBatching(false).create()) {
                obs.put("subscribed_b", waitFor(consumer, base + "-b", true));
                second.send("b0".getBytes(UTF_8));
            }
            obs.put("after_new_topic", texts(Scenarios.receive(consumer, 1, WAIT_MS)));
            obs.put("new_topic_within_10s", (System.nanoTime() - began) / 1_000_000 < WAIT_MS);
            obs.put("create_c", admin(adminUrl, "PUT", base + "-c/partitions", "2"));
            obs.put("subscribed_c", waitFor(consumer, base + "-c-partition-1", true));
            obs.put("topics_after_create", topics(consumer));
            obs.put("delete_a", admin(adminUrl, "DELETE", base + "-a?force=true", null));
            obs.put("dropped_a", waitFor(consumer, base + "-a", false));
            obs.put("topics_after_delete", topics(consumer));
        } finally {
            consumer.close();
        }
    }

    /** Whether the consumer came to have (or not have) {@code topic} among its topics within the wait. */
    private static boolean waitFor(Consumer<byte[]> consumer, String topic, boolean present) throws Exception {
        long deadline = System.nanoTime() + WAIT_MS * 1_000_000;
        while (System.nanoTime() < deadline) {
            if (topics(consumer).contains(topic) == present) {
                return true;
            }
            Thread.sleep(50);
        }
        return false;
    }

    private static List<String> topics(Consumer<byte[]> consumer) {
        return new ArrayList<>(new TreeSet<>(((MultiTopicsConsumerImpl<byte[]>) consumer).getPartitions()));
    }

    private static int admin(String adminUrl, String method, String topicPath, String body) throws Exception {
        String path = topicPath.replace("persistent://", "/admin/v2/persistent/");
        HttpRequest request = HarnessSecurity.authorize(HttpRequest.newBuilder(URI.create(adminUrl + path)))
                .header("Content-Type", "application/json")
                .method(method, body == null ? HttpRequest.BodyPublishers.noBody()
                        : HttpRequest.BodyPublishers.ofString(body))
                .timeout(java.time.Duration.ofSeconds(30)).build();
        return HarnessSecurity.httpClient().send(request, HttpResponse.BodyHandlers.discarding()).statusCode();
    }

    private static List<String> texts(List<Message<byte[]>> messages) {
        List<String> out = new ArrayList<>();
        for (Message<byte[]> msg : messages) {
            out.add(Scenarios.text(msg));
        }
        return out;
    }

    private static Object outcome(Scenarios.Step step) {
        try {
            step.run();
            return "ok";
        } catch (Exception e) {
            return Scenarios.describe(e);
        }
    }
}
