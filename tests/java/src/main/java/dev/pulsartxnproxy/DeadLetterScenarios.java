package dev.pulsartxnproxy;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.MILLISECONDS;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.DeadLetterPolicy;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionType;

/**
 * Dead-letter topics: the Java client's dead-letter producer names an initial subscription, which the broker creates
 * (at the earliest entry) with the producer, so that a consumer that subscribes later finds the dead-lettered
 * messages; without one, a later (Latest) consumer finds nothing.
 */
final class DeadLetterScenarios {

    private static final long QUIET_MS = 3000;
    private static final String INITIAL_SUBSCRIPTION = "dlq-sub";

    private final PulsarClient client;
    private final Map<String, Object> obs;

    DeadLetterScenarios(PulsarClient client, Map<String, Object> obs) {
        this.client = client;
        this.obs = obs;
    }

    /**
     * {@code dead_letter_initial_subscription <topic> <dlq> [initial]}: three messages, a Shared consumer with a
     * dead-letter policy (one redelivery; with {@code initial}, initial subscription {@code dlq-sub}) negatively
     * acknowledges every delivery until quiet; then a consumer subscribes to the dead-letter topic as
     * {@code dlq-sub} (at the latest position) and receives until quiet.
     */
    void initialSubscription(String topic, String dlq, boolean initial) throws Exception {
        DeadLetterPolicy.DeadLetterPolicyBuilder policy =
                DeadLetterPolicy.builder().maxRedeliverCount(1).deadLetterTopic(dlq);
        if (initial) {
            policy.initialSubscriptionName(INITIAL_SUBSCRIPTION);
        }
        List<String> delivered = new ArrayList<>();
        try (Consumer<byte[]> consumer = client.newConsumer().topic(topic).subscriptionName("s")
                .subscriptionType(SubscriptionType.Shared).negativeAckRedeliveryDelay(100, MILLISECONDS)
                .deadLetterPolicy(policy.build()).subscribe();
             Producer<byte[]> producer = client.newProducer().topic(topic).enableBatching(false).create()) {
            for (int i = 0; i < 3; i++) {
                producer.send(("m" + i).getBytes(UTF_8));
            }
            while (true) {
                Message<byte[]> msg = consumer.receive((int) QUIET_MS, MILLISECONDS);
                if (msg == null) {
                    break;
                }
                delivered.add(Scenarios.text(msg) + "@" + msg.getRedeliveryCount());
                consumer.negativeAcknowledge(msg);
            }
        }
        Collections.sort(delivered);
        obs.put("delivered", delivered);
        List<String> deadLettered = new ArrayList<>();
        try (Consumer<byte[]> late = client.newConsumer().topic(dlq).subscriptionName(INITIAL_SUBSCRIPTION)
                .subscribe()) {
            while (true) {
                Message<byte[]> msg = late.receive((int) QUIET_MS, MILLISECONDS);
                if (msg == null) {
                    break;
                }
                deadLettered.add(Scenarios.text(msg));
                late.acknowledge(msg);
            }
        }
        Collections.sort(deadLettered);
        obs.put("dead_lettered", deadLettered);
    }
}
