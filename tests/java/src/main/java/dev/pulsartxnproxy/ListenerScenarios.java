package dev.pulsartxnproxy;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.SECONDS;

import java.util.Map;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.impl.PulsarClientImpl;

/** A Java client configured with a listener name ({@code listenerName}): its lookups ask for that listener. */
final class ListenerScenarios {

    private final String serviceUrl;
    private final Map<String, Object> obs;

    /** {@code client}: the harness's client, whose service URL the listener's client uses. */
    ListenerScenarios(PulsarClient client, Map<String, Object> obs) {
        this.serviceUrl = ((PulsarClientImpl) client).getConfiguration().getServiceUrl();
        this.obs = obs;
    }

    /**
     * {@code listener_produce <topic> <listenerName>}: a client with that listener name creates a producer and sends
     * one message; the outcome ("ok" or the exception).
     */
    void produce(String topic, String listenerName) throws Exception {
        try (PulsarClient client = HarnessSecurity.apply(PulsarClient.builder().serviceUrl(serviceUrl)
                .listenerName(listenerName).operationTimeout(3, SECONDS)).build()) {
            try (Producer<byte[]> producer = client.newProducer().topic(topic).create()) {
                producer.send("through a listener".getBytes(UTF_8));
                obs.put("produce", "ok");
            } catch (Exception e) {
                obs.put("produce", Scenarios.describe(e).get("type"));
            }
        }
    }
}
