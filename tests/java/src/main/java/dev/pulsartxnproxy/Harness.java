package dev.pulsartxnproxy;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.api.PulsarClient;

/**
 * Runs one transaction scenario with the official Pulsar Java client and prints one JSON line of observations.
 *
 * <p>Usage: {@code java -cp target/classes:target/lib/* dev.pulsartxnproxy.Harness <serviceUrl> <scenario> [args]}.
 * The process records what happened and never asserts: exit code 0 means the scenario ran (pytest judges the
 * observations); 1 means an unexpected failure, printed as {@code {"error": ..., "observations": ...}}; 2 means a
 * usage error.
 */
public final class Harness {

    private static final ObjectMapper JSON = new ObjectMapper();

    private Harness() {
    }

    public static void main(String[] argv) {
        if (argv.length < 2) {
            finish(2, Map.of("error", Map.of("type", "Usage", "message",
                    "usage: Harness <serviceUrl> <scenario> [args...]; scenarios: " + Scenarios.NAMES)));
            return;
        }
        String url = argv[0];
        String scenario = argv[1];
        List<String> args = Arrays.asList(argv).subList(2, argv.length);
        if (!Scenarios.NAMES.contains(scenario)) {
            finish(2, Map.of("error", Map.of("type", "Usage", "message",
                    "unknown scenario " + scenario + "; scenarios: " + Scenarios.NAMES)));
            return;
        }
        Map<String, Object> observations = new LinkedHashMap<>();
        observations.put("scenario", scenario);
        Scenarios scenarios = null;
        int code = 0;
        Map<String, Object> result = observations;
        Map<String, Object> timing = new LinkedHashMap<>();
        long began = System.nanoTime();
        try {
            PulsarClient client = Scenarios.newClient(url);
            timing.put("client_ms", (System.nanoTime() - began) / 1_000_000);
            scenarios = new Scenarios(client, observations);
            scenarios.run(scenario, args);
            timing.put("scenario_ms", (System.nanoTime() - began) / 1_000_000);
        } catch (Throwable t) {
            result = new LinkedHashMap<>();
            result.put("error", Scenarios.describe(t));
            result.put("observations", observations);
            code = 1;
        }
        if (scenarios != null && !Scenarios.LEAVE_OPEN.contains(scenario)) {
            // Some scenarios leave transactions open on purpose: the process just goes away.
            try {
                scenarios.closeAll(5);
            } catch (Exception ignored) {
                // The observations are complete; a slow close must not change the outcome.
            }
            timing.put("closed_ms", (System.nanoTime() - began) / 1_000_000);
        }
        observations.put("timing_ms", timing);
        finish(code, result);
    }

    private static void finish(int code, Map<String, Object> result) {
        int status = code;
        try {
            System.out.println(JSON.writeValueAsString(result));
        } catch (JsonProcessingException e) {
            e.printStackTrace();
            status = 1;
        }
        System.out.flush();
        System.exit(status);
    }
}
