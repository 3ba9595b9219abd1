package dev.pulsartxnproxy;

import java.io.InputStream;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;
import org.apache.pulsar.client.api.ClientBuilder;
import org.apache.pulsar.client.api.PulsarClientException;

/**
 * The broker's TLS and authentication settings, given by the conformance command in the environment.
 *
 * <p>{@code HARNESS_AUTH_PLUGIN} and {@code HARNESS_AUTH_PARAMS} (as {@code pulsar-client --auth-plugin/--auth-params}
 * take them), {@code HARNESS_TLS_TRUST_CERTS_FILE_PATH}, {@code HARNESS_TLS_ALLOW_INSECURE_CONNECTION} and
 * {@code HARNESS_TLS_VALIDATE_HOSTNAME} ("true"), and {@code HARNESS_HTTP_AUTHORIZATION}, the Authorization header of
 * admin REST calls. Every client and admin call of a harness scenario goes through here; none set means none used.
 */
final class HarnessSecurity {

    private HarnessSecurity() {
    }

    private static String env(String name) {
        String value = System.getenv(name);
        return value == null || value.isEmpty() ? null : value;
    }

    /** The builder with the authentication plugin and TLS settings of the environment. */
    static ClientBuilder apply(ClientBuilder builder) throws PulsarClientException {
        String plugin = env("HARNESS_AUTH_PLUGIN");
        if (plugin != null) {
            String params = env("HARNESS_AUTH_PARAMS");
            builder.authentication(plugin, params == null ? "" : params);
        }
        String trust = env("HARNESS_TLS_TRUST_CERTS_FILE_PATH");
        if (trust != null) {
            builder.tlsTrustCertsFilePath(trust);
        }
        builder.allowTlsInsecureConnection("true".equals(env("HARNESS_TLS_ALLOW_INSECURE_CONNECTION")));
        builder.enableTlsHostnameVerification("true".equals(env("HARNESS_TLS_VALIDATE_HOSTNAME")));
        return builder;
    }

    /** The request with the admin API's Authorization header, when the environment gives one. */
    static HttpRequest.Builder authorize(HttpRequest.Builder request) {
        String authorization = env("HARNESS_HTTP_AUTHORIZATION");
        return authorization == null ? request : request.header("Authorization", authorization);
    }

    /** An HTTP client trusting what the environment says (the trust file, or anything when insecure). */
    static HttpClient httpClient() throws Exception {
        String trust = env("HARNESS_TLS_TRUST_CERTS_FILE_PATH");
        boolean insecure = "true".equals(env("HARNESS_TLS_ALLOW_INSECURE_CONNECTION"));
        if (trust == null && !insecure) {
            return HttpClient.newHttpClient();
        }
        TrustManager[] managers;
        if (insecure) {
            managers = new TrustManager[] {new X509TrustManager() {
                @Override
                public void checkClientTrusted(X509Certificate[] chain, String authType) {
                }

                @Override
                public void checkServerTrusted(X509Certificate[] chain, String authType) {
                }

                @Override
                public X509Certificate[] getAcceptedIssuers() {
                    return new X509Certificate[0];
                }
            }};
        } else {
            KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
            store.load(null, null);
            try (InputStream in = Files.newInputStream(Path.of(trust))) {
                int index = 0;
                for (Certificate certificate : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
                    store.setCertificateEntry("ca-" + index++, certificate);
                }
            }
            TrustManagerFactory factory = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            factory.init(store);
            managers = factory.getTrustManagers();
        }
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(null, managers, null);
        return HttpClient.newBuilder().sslContext(context).build();
    }
}
