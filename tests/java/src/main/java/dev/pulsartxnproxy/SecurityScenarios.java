package dev.pulsartxnproxy;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.SECONDS;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.apache.pulsar.client.api.Authentication;
import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.impl.auth.AuthenticationBasic;

/**
 * TLS and authentication with the official Java client: its own entry point (the transaction harness's client has
 * no credentials), printing one JSON line of observations like {@link Harness}.
 *
 * <p>Usage: {@code SecurityScenarios <plainUrl> <tlsUrl> <materialDir> <topicPrefix>}; the directory holds what
 * {@code tests/security.py} writes ({@code ca.pem}, {@code other-ca.pem}, {@code client.pem}/{@code client.key},
 * {@code rogue-client.*}) plus {@code alice.token}, {@code forged.token}, {@code expired.token} and
 * {@code short-<exp>.token} files (tokens expiring at epoch second {@code exp}, every 2 s over two minutes: the
 * refreshing supplier hands out the first that is still valid for 1.5 s).
 * A transaction is committed over TLS with a token, so the coordinator's lookups and connections authenticate too.
 */
public final class SecurityScenarios {

    private static final ObjectMapper JSON = new ObjectMapper();

    private final String plainUrl;
    private final String tlsUrl;
    private final String dir;
    private final String prefix;
    private final Map<String, Object> obs = new LinkedHashMap<>();

    private SecurityScenarios(String plainUrl, String tlsUrl, String dir, String prefix) {
        this.plainUrl = plainUrl;
        this.tlsUrl = tlsUrl;
        this.dir = dir;
        this.prefix = prefix;
    }

    public static void main(String[] argv) throws Exception {
        SecurityScenarios s = new SecurityScenarios(argv[0], argv[1], argv[2], argv[3]);
        int code = 0;
        try {
            s.run();
        } catch (Throwable t) {
            s.obs.put("error", Scenarios.describe(t));
            code = 1;
        }
        System.out.println(JSON.writeValueAsString(s.obs));
        System.out.flush();
        System.exit(code);
    }

    private String file(String name) {
        return dir + "/" + name;
    }

    private String read(String name) throws Exception {
        return java.nio.file.Files.readString(java.nio.file.Path.of(file(name))).strip();
    }

    private PulsarClient client(String url, Authentication auth, String trust, boolean transactions)
            throws Exception {
        var builder = PulsarClient.builder().serviceUrl(url).operationTimeout(5, SECONDS)
                .connectionTimeout(5, SECONDS).enableTransaction(transactions);
        if (auth != null) {
            builder.authentication(auth);
        }
        if (url.startsWith("pulsar+ssl")) {
            builder.tlsTrustCertsFilePath(file(trust)).enableTlsHostnameVerification(true);
        }
        return builder.build();
    }

    /** Produce three messages in a transaction that commits, then consume them: their texts, or the error. */
    private Object roundTrip(String url, Authentication auth, String trust, String tag) {
        try (PulsarClient client = client(url, auth, trust, true)) {
            String topic = prefix + "-" + tag;
            List<String> got = new ArrayList<>();
            try (Consumer<byte[]> consumer = client.newConsumer().topic(topic).subscriptionName("s")
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
                    Producer<byte[]> producer = client.newProducer().topic(topic).sendTimeout(0, SECONDS).create()) {
                Transaction txn = client.newTransaction().withTransactionTimeout(30, SECONDS).build().get();
                for (int i = 0; i < 3; i++) {
                    producer.newMessage(txn).value(("m" + i).getBytes(UTF_8)).send();
                }
                txn.commit().get();
                for (int i = 0; i < 3; i++) {
                    Message<byte[]> message = consumer.receive(10, SECONDS);
                    got.add(message == null ? null : new String(message.getValue(), UTF_8));
                }
            }
            return got;
        } catch (Throwable t) {
            return Map.of("error", Scenarios.describe(t).get("type"));
        }
    }

    /** Create a producer (no transactions): "created", or the exception class. */
    private Object refused(String url, Authentication auth, String trust, String tag) {
        try (PulsarClient client = client(url, auth, trust, false)) {
            client.newProducer().topic(prefix + "-" + tag).create().close();
            return "created";
        } catch (Throwable t) {
            return Map.of("error", Scenarios.describe(t).get("type"));
        }
    }

    private void run() throws Exception {
        Authentication alice = AuthenticationFactory.token(read("alice.token"));
        obs.put("token_plain", roundTrip(plainUrl, alice, "ca.pem", "plain"));
        obs.put("token_tls", roundTrip(tlsUrl, AuthenticationFactory.token(read("alice.token")), "ca.pem", "tls"));
        AuthenticationBasic basic = new AuthenticationBasic();
        basic.configure("{\"userId\":\"alice\",\"password\":\"alice-secret\"}");
        obs.put("basic_tls", roundTrip(tlsUrl, basic, "ca.pem", "basic"));
        Authentication cert = AuthenticationFactory.TLS(file("client.pem"), file("client.key"));
        obs.put("certificate", roundTrip(tlsUrl, cert, "ca.pem", "cert"));

        obs.put("forged", refused(plainUrl, AuthenticationFactory.token(read("forged.token")), "ca.pem", "forged"));
        obs.put("expired", refused(plainUrl, AuthenticationFactory.token(read("expired.token")), "ca.pem", "exp"));
        obs.put("missing", refused(plainUrl, null, "ca.pem", "missing"));
        AuthenticationBasic wrong = new AuthenticationBasic();
        wrong.configure("{\"userId\":\"alice\",\"password\":\"wrong\"}");
        obs.put("wrong_password", refused(tlsUrl, wrong, "ca.pem", "wrong"));
        obs.put("untrusted_server", refused(tlsUrl, AuthenticationFactory.token(read("alice.token")),
                "other-ca.pem", "untrusted"));
        Authentication rogue = AuthenticationFactory.TLS(file("rogue-client.pem"), file("rogue-client.key"));
        obs.put("untrusted_client_certificate", refused(tlsUrl, rogue, "ca.pem", "rogue"));

        obs.put("refresh", refresh());
    }

    /**
     * A producer whose token expires every few seconds keeps sending for 8 s: the broker's AUTH_CHALLENGE makes the
     * client ask the supplier again; every send succeeds on the one connection.
     */
    private Map<String, Object> refresh() throws Exception {
        AtomicInteger calls = new AtomicInteger();
        Supplier<String> supplier = () -> {
            calls.incrementAndGet();
            long now = System.currentTimeMillis();
            try (var files = java.nio.file.Files.list(java.nio.file.Path.of(dir))) {
                long exp = files.map(p -> p.getFileName().toString())
                        .filter(n -> n.startsWith("short-") && n.endsWith(".token"))
                        .mapToLong(n -> Long.parseLong(n.substring(6, n.length() - 6)))
                        .filter(e -> e * 1000 > now + 1500).min().orElseThrow();
                return read("short-" + exp + ".token");
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        };
        Map<String, Object> out = new LinkedHashMap<>();
        int sent = 0;
        try (PulsarClient client = client(plainUrl, AuthenticationFactory.token(supplier), "ca.pem", false);
                Producer<byte[]> producer = client.newProducer().topic(prefix + "-refresh").create()) {
            for (int i = 0; i < 16; i++) {
                producer.send(("r" + i).getBytes(UTF_8));
                sent++;
                Thread.sleep(500);
            }
        } catch (Throwable t) {
            out.put("error", Scenarios.describe(t).get("type"));
        }
        out.put("sent", sent);
        out.put("supplier_asked_again", calls.get() >= 2);
        return out;
    }
}
