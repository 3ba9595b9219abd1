package dev.pulsartxnproxy;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.SECONDS;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.transaction.Transaction;

/**
 * Transactions under authorization with the official Java client: its own entry point, printing one JSON line of
 * observations like {@link Harness}.
 *
 * <p>Usage: {@code AuthorizationScenarios <serviceUrl> <topic> <writerToken> <readerToken> <strangerToken>}. The
 * writer may produce and consume on the topic, the reader only consume, the stranger nothing; the writer and the
 * reader may also look the transaction coordinators up. Each step is recorded as {@code {"ok": value}} or
 * {@code {"error": {type, message}}}.
 */
public final class AuthorizationScenarios {

    private static final ObjectMapper JSON = new ObjectMapper();

    /** A step whose outcome is an observation. */
    @FunctionalInterface
    interface Step {
        Object run() throws Exception;
    }

    private final String url;
    private final Map<String, Object> obs = new LinkedHashMap<>();

    private AuthorizationScenarios(String url) {
        this.url = url;
    }

    public static void main(String[] argv) throws Exception {
        AuthorizationScenarios s = new AuthorizationScenarios(argv[0]);
        int code = 0;
        try {
            s.run(argv[1], argv[2], argv[3], argv[4]);
        } catch (Throwable t) {
            s.obs.put("error", Scenarios.describe(t));
            code = 1;
        }
        System.out.println(JSON.writeValueAsString(s.obs));
        System.out.flush();
        System.exit(code);
    }

    private PulsarClient client(String token) throws Exception {
        return PulsarClient.builder().serviceUrl(url).authentication(AuthenticationFactory.token(token))
                .enableTransaction(true).operationTimeout(10, SECONDS).build();
    }

    private void step(String key, Step step) {
        Map<String, Object> outcome = new LinkedHashMap<>();
        try {
            outcome.put("ok", step.run());
        } catch (Throwable t) {
            Map<String, Object> error = Scenarios.describe(t);
            // The texts carry request ids and addresses; the type is the observation.
            outcome.put("error", error.get("type"));
        }
        obs.put(key, outcome);
    }

    private void run(String topic, String writerToken, String readerToken, String strangerToken) throws Exception {
        try (PulsarClient writer = client(writerToken)) {
            Producer<byte[]> producer = writer.newProducer().topic(topic).sendTimeout(0, SECONDS).create();
            Consumer<byte[]> consumer = writer.newConsumer().topic(topic).subscriptionName("writer-sub")
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
            step("writer_commit", () -> {
                Transaction txn = writer.newTransaction().withTransactionTimeout(60, SECONDS).build().get();
                producer.newMessage(txn).value("committed".getBytes(UTF_8)).send();
                txn.commit().get();
                return null;
            });
            step("writer_receives", () -> {
                Message<byte[]> message = consumer.receive(10, SECONDS);
                Transaction txn = writer.newTransaction().withTransactionTimeout(60, SECONDS).build().get();
                consumer.acknowledgeAsync(message.getMessageId(), txn).get();
                txn.commit().get();
                return message == null ? null : new String(message.getValue(), UTF_8);
            });
        }
        try (PulsarClient reader = client(readerToken)) {
            step("reader_opens_transaction", () -> {
                reader.newTransaction().withTransactionTimeout(60, SECONDS).build().get().abort().get();
                return null;
            });
            step("reader_produces", () -> reader.newProducer().topic(topic).create().getTopic());
        }
        step("stranger_client", () -> {
            try (PulsarClient stranger = client(strangerToken)) {
                return List.of();
            }
        });
    }
}
