package dev.pulsartxnproxy.admin;

import static java.util.concurrent.TimeUnit.SECONDS;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.Authentication;
import org.apache.pulsar.client.api.AuthenticationFactory;

/**
 * {@code PulsarAdmin} with TLS and credentials: its own entry point, printing one JSON line of observations.
 *
 * <p>Usage: {@code SecurityAdmin <httpUrl> <httpsUrl> <materialDir>}; the directory holds what
 * {@code tests/security.py} writes and the token files {@code alice.token}, {@code forged.token},
 * {@code expired.token}. Each case lists the clusters and records them, or the exception class and HTTP status.
 */
public final class SecurityAdmin {

    private static final ObjectMapper JSON = new ObjectMapper();

    private SecurityAdmin() {
    }

    public static void main(String[] argv) throws Exception {
        String http = argv[0];
        String https = argv[1];
        String dir = argv[2];
        Map<String, Object> obs = new LinkedHashMap<>();
        Authentication alice = token(dir, "alice.token");
        obs.put("token_http", clusters(http, alice, dir, "ca.pem"));
        obs.put("token_https", clusters(https, token(dir, "alice.token"), dir, "ca.pem"));
        obs.put("basic_https", clusters(https, AuthenticationFactory.create(
                "org.apache.pulsar.client.impl.auth.AuthenticationBasic",
                "{\"userId\":\"bob\",\"password\":\"bobpass\"}"), dir, "ca.pem"));
        obs.put("certificate_https", clusters(https,
                AuthenticationFactory.TLS(dir + "/client.pem", dir + "/client.key"), dir, "ca.pem"));
        obs.put("none", clusters(http, null, dir, "ca.pem"));
        obs.put("forged", clusters(http, token(dir, "forged.token"), dir, "ca.pem"));
        obs.put("expired", clusters(http, token(dir, "expired.token"), dir, "ca.pem"));
        obs.put("wrong_password", clusters(https, AuthenticationFactory.create(
                "org.apache.pulsar.client.impl.auth.AuthenticationBasic",
                "{\"userId\":\"bob\",\"password\":\"nope\"}"), dir, "ca.pem"));
        obs.put("untrusted_server", clusters(https, token(dir, "alice.token"), dir, "other-ca.pem"));
        System.out.println(JSON.writeValueAsString(obs));
        System.out.flush();
        System.exit(0);
    }

    private static Authentication token(String dir, String name) throws Exception {
        return AuthenticationFactory.token(Files.readString(Path.of(dir, name)).strip());
    }

    private static Object clusters(String url, Authentication auth, String dir, String trust) {
        var builder = PulsarAdmin.builder().serviceHttpUrl(url).connectionTimeout(5, SECONDS)
                .requestTimeout(10, SECONDS).tlsTrustCertsFilePath(dir + "/" + trust)
                .enableTlsHostnameVerification(true);
        if (auth != null) {
            builder.authentication(auth);
        }
        try (PulsarAdmin admin = builder.build()) {
            return admin.clusters().getClusters();
        } catch (PulsarAdminException e) {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("error", e.getClass().getSimpleName());
            out.put("status", e.getStatusCode());
            return out;
        } catch (Exception e) {
            return Map.of("error", e.getClass().getSimpleName());
        }
    }
}
