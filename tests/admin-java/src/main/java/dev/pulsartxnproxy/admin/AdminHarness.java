package dev.pulsartxnproxy.admin;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.SECONDS;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.common.policies.data.AuthAction;
import org.apache.pulsar.common.policies.data.AutoTopicCreationOverride;
import org.apache.pulsar.common.policies.data.BacklogQuota;
import org.apache.pulsar.common.policies.data.RetentionPolicies;
import org.apache.pulsar.common.policies.data.SchemaCompatibilityStrategy;
import org.apache.pulsar.common.policies.data.TenantInfo;
import org.apache.pulsar.common.schema.SchemaInfo;
import org.apache.pulsar.common.schema.SchemaType;
import org.apache.pulsar.common.util.ObjectMapperFactory;

/**
 * Drives the server's admin REST API with the official {@code PulsarAdmin} client and prints one JSON line of
 * observations: {@code java -cp ... dev.pulsartxnproxy.admin.AdminHarness <adminUrl> <serviceUrl> <scenario> [args]}.
 *
 * <p>Every admin call is recorded as {@code {"ok": result}} or {@code {"error": {type, status, message}}}; results
 * that are admin data objects are written back with the client's own JSON mapper, so the observations show what the
 * client parsed. The harness never asserts: pytest judges. Exit code 1 means the scenario itself broke.
 */
public final class AdminHarness {

    /** A call whose outcome is an observation. */
    @FunctionalInterface
    interface Step {
        Object run() throws Exception;
    }

    private static final ObjectMapper JSON = new ObjectMapper();
    static final List<String> SCENARIOS = List.of("tenants", "topics", "transactions", "schemas", "topicPolicies",
            "status", "permissions");
    /** A token both clients authenticate with, when the environment gives one. */
    private static final String TOKEN = System.getenv("PULSAR_AUTH_TOKEN");
    private static final long WAIT_SECONDS = 15;

    private final PulsarAdmin admin;
    private final PulsarClient client;
    private final Map<String, Object> obs;

    private AdminHarness(PulsarAdmin admin, PulsarClient client, Map<String, Object> obs) {
        this.admin = admin;
        this.client = client;
        this.obs = obs;
    }

    public static void main(String[] argv) {
        if (argv.length < 3 || !SCENARIOS.contains(argv[2])) {
            finish(2, Map.of("error", Map.of("type", "Usage", "message",
                    "usage: AdminHarness <adminUrl> <serviceUrl> <scenario> [args]; scenarios: " + SCENARIOS)));
            return;
        }
        List<String> args = List.of(argv).subList(3, argv.length);
        Map<String, Object> obs = new LinkedHashMap<>();
        obs.put("scenario", argv[2]);
        int code = 0;
        Map<String, Object> result = obs;
        var adminBuilder = PulsarAdmin.builder().serviceHttpUrl(argv[0])
                .connectionTimeout(5, SECONDS).requestTimeout((int) WAIT_SECONDS, SECONDS);
        // Only the transactions scenario needs the coordinators (a role without grants may not look them up).
        var clientBuilder = PulsarClient.builder().serviceUrl(argv[1])
                .enableTransaction("transactions".equals(argv[2])).operationTimeout(10, SECONDS);
        if (TOKEN != null && !TOKEN.isEmpty()) {
            adminBuilder.authentication(AuthenticationFactory.token(TOKEN));
            clientBuilder.authentication(AuthenticationFactory.token(TOKEN));
        }
        try (PulsarAdmin admin = adminBuilder.build(); PulsarClient client = clientBuilder.build()) {
            AdminHarness harness = new AdminHarness(admin, client, obs);
            switch (argv[2]) {
                case "tenants" -> harness.tenants(args.get(0));
                case "topics" -> harness.topics(args.get(0));
                case "transactions" -> harness.transactions(args.get(0));
                case "schemas" -> harness.schemas(args.get(0));
                case "topicPolicies" -> harness.topicPolicies(args.get(0));
                case "permissions" -> harness.permissions(args.get(0), args.get(1));
                default -> harness.status(args.get(0));
            }
        } catch (Throwable t) {
            result = new LinkedHashMap<>();
            result.put("error", describe(t));
            result.put("observations", obs);
            code = 1;
        }
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

    static Map<String, Object> describe(Throwable t) {
        Throwable cause = t;
        while ((cause instanceof ExecutionException || cause instanceof java.util.concurrent.CompletionException)
                && cause.getCause() != null) {
            cause = cause.getCause();
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("type", cause.getClass().getSimpleName());
        if (cause instanceof PulsarAdminException pae) {
            out.put("status", pae.getStatusCode());
            out.put("message", pae.getHttpError());
        } else {
            out.put("message", String.valueOf(cause.getMessage()));
        }
        return out;
    }

    /** Record the outcome of a step under {@code key}. */
    private void step(String key, Step step) {
        Map<String, Object> outcome = new LinkedHashMap<>();
        try {
            outcome.put("ok", step.run());
        } catch (Throwable t) {
            outcome.put("error", describe(t));
        }
        obs.put(key, outcome);
    }

    /** An admin data object as the client's own mapper writes it, as a tree. */
    private static JsonNode raw(Object value) throws Exception {
        return JSON.readTree(ObjectMapperFactory.getMapper().writer().writeValueAsString(value));
    }

    private static Map<String, Object> message(Message<byte[]> msg) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("data", new String(msg.getData(), UTF_8));
        out.put("id", msg.getMessageId().toString());
        out.put("properties", msg.getProperties());
        out.put("publishTime", msg.getPublishTime());
        out.put("producer", msg.getProducerName());
        return out;
    }

    private static List<Object> messages(List<Message<byte[]>> list) {
        List<Object> out = new ArrayList<>();
        for (Message<byte[]> msg : list) {
            out.add(message(msg));
        }
        return out;
    }

    // -- tenants, namespaces, policies ------------------------------------------------------------------------

    /** Grants, lists and revokes permissions on a namespace, a subscription and a topic (which must exist). */
    private void permissions(String ns, String topic) {
        step("grant_namespace", () -> {
            admin.namespaces().grantPermissionOnNamespace(ns, "alice", EnumSet.of(AuthAction.produce,
                    AuthAction.consume));
            return null;
        });
        step("namespace_permissions", () -> raw(admin.namespaces().getPermissions(ns)));
        step("grant_subscription", () -> {
            admin.namespaces().grantPermissionOnSubscription(ns, "sub1", Set.of("carol"));
            return null;
        });
        step("subscription_permissions", () -> raw(admin.namespaces().getPermissionOnSubscription(ns)));
        step("grant_topic", () -> {
            admin.topics().grantPermission(topic, "bob", EnumSet.of(AuthAction.consume));
            return null;
        });
        step("topic_permissions", () -> raw(admin.topics().getPermissions(topic)));
        step("revoke_topic", () -> {
            admin.topics().revokePermissions(topic, "bob");
            return null;
        });
        step("revoke_subscription", () -> {
            admin.namespaces().revokePermissionOnSubscription(ns, "sub1", "carol");
            return null;
        });
        step("revoke_namespace", () -> {
            admin.namespaces().revokePermissionsOnNamespace(ns, "alice");
            return null;
        });
        step("namespace_permissions_after", () -> raw(admin.namespaces().getPermissions(ns)));
    }

    private void tenants(String tenant) {
        String ns = tenant + "/ns1";
        TenantInfo info = TenantInfo.builder().adminRoles(Set.of("role-a")).allowedClusters(Set.of("standalone"))
                .build();
        step("tenants_before", () -> admin.tenants().getTenants());
        step("create_tenant", () -> {
            admin.tenants().createTenant(tenant, info);
            return null;
        });
        step("create_tenant_again", () -> {
            admin.tenants().createTenant(tenant, info);
            return null;
        });
        step("create_tenant_unknown_cluster", () -> {
            admin.tenants().createTenant(tenant + "-x",
                    TenantInfo.builder().allowedClusters(Set.of("nowhere")).build());
            return null;
        });
        step("get_tenant", () -> raw(admin.tenants().getTenantInfo(tenant)));
        step("get_missing_tenant", () -> raw(admin.tenants().getTenantInfo(tenant + "-missing")));
        step("update_tenant", () -> {
            admin.tenants().updateTenant(tenant, TenantInfo.builder().adminRoles(Set.of("role-b"))
                    .allowedClusters(Set.of("standalone")).build());
            return null;
        });
        step("get_updated_tenant", () -> raw(admin.tenants().getTenantInfo(tenant)));
        step("tenants_after_create", () -> admin.tenants().getTenants());
        step("create_namespace", () -> {
            admin.namespaces().createNamespace(ns);
            return null;
        });
        step("create_namespace_again", () -> {
            admin.namespaces().createNamespace(ns);
            return null;
        });
        step("create_namespace_missing_tenant", () -> {
            admin.namespaces().createNamespace(tenant + "-missing/ns");
            return null;
        });
        step("create_namespace_with_clusters", () -> {
            admin.namespaces().createNamespace(tenant + "/ns2", Set.of("standalone"));
            return null;
        });
        step("namespaces", () -> admin.namespaces().getNamespaces(tenant));
        step("set_ttl", () -> {
            admin.namespaces().setNamespaceMessageTTL(ns, 120);
            return null;
        });
        step("get_ttl", () -> admin.namespaces().getNamespaceMessageTTL(ns));
        step("set_negative_ttl", () -> {
            admin.namespaces().setNamespaceMessageTTL(ns, -5);
            return null;
        });
        step("set_deduplication", () -> {
            admin.namespaces().setDeduplicationStatus(ns, true);
            return null;
        });
        step("get_deduplication", () -> admin.namespaces().getDeduplicationStatus(ns));
        step("set_retention", () -> {
            admin.namespaces().setRetention(ns, new RetentionPolicies(60, 100));
            return null;
        });
        step("get_retention", () -> raw(admin.namespaces().getRetention(ns)));
        step("set_bad_retention", () -> {
            admin.namespaces().setRetention(ns, new RetentionPolicies(0, 10));
            return null;
        });
        step("set_auto_topic_creation", () -> {
            admin.namespaces().setAutoTopicCreation(ns, AutoTopicCreationOverride.builder()
                    .allowAutoTopicCreation(true).topicType("partitioned").defaultNumPartitions(2).build());
            return null;
        });
        step("get_auto_topic_creation", () -> raw(admin.namespaces().getAutoTopicCreation(ns)));
        step("set_bad_auto_topic_creation", () -> {
            admin.namespaces().setAutoTopicCreation(ns, AutoTopicCreationOverride.builder()
                    .allowAutoTopicCreation(true).topicType("partitioned").defaultNumPartitions(0).build());
            return null;
        });
        step("set_schema_compatibility", () -> {
            admin.namespaces().setSchemaCompatibilityStrategy(ns, SchemaCompatibilityStrategy.BACKWARD);
            return null;
        });
        step("get_schema_compatibility", () -> String.valueOf(admin.namespaces().getSchemaCompatibilityStrategy(ns)));
        step("set_max_producers", () -> {
            admin.namespaces().setMaxProducersPerTopic(ns, 7);
            return null;
        });
        step("get_max_producers", () -> admin.namespaces().getMaxProducersPerTopic(ns));
        step("policies", () -> raw(admin.namespaces().getPolicies(ns)));
        step("remove_ttl", () -> {
            admin.namespaces().removeNamespaceMessageTTL(ns);
            return null;
        });
        step("get_ttl_after_remove", () -> admin.namespaces().getNamespaceMessageTTL(ns));
        step("delete_tenant_with_namespaces", () -> {
            admin.tenants().deleteTenant(tenant);
            return null;
        });
        step("delete_namespace", () -> {
            admin.namespaces().deleteNamespace(ns);
            admin.namespaces().deleteNamespace(tenant + "/ns2");
            return null;
        });
        step("delete_missing_namespace", () -> {
            admin.namespaces().deleteNamespace(ns);
            return null;
        });
        step("namespaces_after_delete", () -> admin.namespaces().getNamespaces(tenant));
        step("delete_tenant", () -> {
            admin.tenants().deleteTenant(tenant);
            return null;
        });
        step("tenants_after_delete", () -> admin.tenants().getTenants());
    }

    // -- topics and subscriptions -------------------------------------------------------------------------

    private void topics(String prefix) throws Exception {
        String part = prefix + "-part";
        String plain = prefix + "-plain";
        String namespace = "public/default";
        step("create_partitioned", () -> {
            admin.topics().createPartitionedTopic(part, 3);
            return null;
        });
        step("create_partitioned_again", () -> {
            admin.topics().createPartitionedTopic(part, 3);
            return null;
        });
        step("partitions", () -> admin.topics().getPartitionedTopicMetadata(part).partitions);
        step("update_partitions", () -> {
            admin.topics().updatePartitionedTopic(part, 4);
            return null;
        });
        step("partitions_after_update", () -> admin.topics().getPartitionedTopicMetadata(part).partitions);
        step("shrink_partitions", () -> {
            admin.topics().updatePartitionedTopic(part, 2);
            return null;
        });
        step("partitioned_list", () -> admin.topics().getPartitionedTopicList(namespace));
        step("create_plain", () -> {
            admin.topics().createNonPartitionedTopic(plain);
            return null;
        });
        step("create_plain_again", () -> {
            admin.topics().createNonPartitionedTopic(plain);
            return null;
        });
        step("list", () -> admin.topics().getList(namespace));
        step("stats_missing", () -> raw(admin.topics().getStats(prefix + "-missing")));

        Producer<byte[]> producer = client.newProducer().topic(plain).producerName(prefix + "-producer")
                .enableBatching(false).create();
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            ids.add(producer.newMessage().value(("m" + i).getBytes(UTF_8)).property("index", "" + i).send()
                    .toString());
        }
        obs.put("sent_ids", ids);
        step("create_subscription", () -> {
            admin.topics().createSubscription(plain, "admin-sub", MessageId.earliest);
            return null;
        });
        step("create_subscription_again", () -> {
            admin.topics().createSubscription(plain, "admin-sub", MessageId.earliest);
            return null;
        });
        step("create_subscription_latest", () -> {
            admin.topics().createSubscription(plain, "latest-sub", MessageId.latest);
            return null;
        });
        step("subscriptions", () -> admin.topics().getSubscriptions(plain));
        step("stats", () -> raw(admin.topics().getStats(plain)));
        step("internal_stats", () -> raw(admin.topics().getInternalStats(plain)));
        step("last_message_id", () -> admin.topics().getLastMessageId(plain).toString());
        step("peek", () -> messages(admin.topics().peekMessages(plain, "admin-sub", 3)));
        step("examine_earliest", () -> message(admin.topics().examineMessage(plain, "earliest", 1)));
        step("examine_latest", () -> message(admin.topics().examineMessage(plain, "latest", 1)));
        step("skip", () -> {
            admin.topics().skipMessages(plain, "admin-sub", 4);
            return admin.topics().getStats(plain).getSubscriptions().get("admin-sub").getMsgBacklog();
        });
        step("peek_after_skip", () -> messages(admin.topics().peekMessages(plain, "admin-sub", 1)));
        MessageId third = admin.topics().peekMessages(plain, "admin-sub", 1).get(0).getMessageId();
        step("reset_to_earliest_by_id", () -> {
            admin.topics().resetCursor(plain, "admin-sub", MessageId.earliest);
            return admin.topics().getStats(plain).getSubscriptions().get("admin-sub").getMsgBacklog();
        });
        step("reset_by_id", () -> {
            admin.topics().resetCursor(plain, "admin-sub", third);
            return admin.topics().getStats(plain).getSubscriptions().get("admin-sub").getMsgBacklog();
        });
        step("reset_by_future_time", () -> {
            admin.topics().resetCursor(plain, "admin-sub", System.currentTimeMillis() + 3_600_000L);
            return admin.topics().getStats(plain).getSubscriptions().get("admin-sub").getMsgBacklog();
        });
        step("reset_by_past_time", () -> {
            admin.topics().resetCursor(plain, "admin-sub", 0L);
            return admin.topics().getStats(plain).getSubscriptions().get("admin-sub").getMsgBacklog();
        });
        step("clear_backlog", () -> {
            admin.topics().skipAllMessages(plain, "admin-sub");
            return admin.topics().getStats(plain).getSubscriptions().get("admin-sub").getMsgBacklog();
        });
        step("expire_all", () -> {
            admin.topics().resetCursor(plain, "admin-sub", 0L);
            admin.topics().expireMessages(plain, "admin-sub", 0);
            return admin.topics().getStats(plain).getSubscriptions().get("admin-sub").getMsgBacklog();
        });
        step("peek_missing_subscription", () -> messages(admin.topics().peekMessages(plain, "nope", 1)));

        Consumer<byte[]> consumer = client.newConsumer().topic(plain).subscriptionName("live-sub")
                .consumerName(prefix + "-consumer").subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .subscribe();
        for (int i = 0; i < 3; i++) {
            consumer.acknowledge(consumer.receive((int) WAIT_SECONDS, SECONDS));
        }
        step("stats_with_consumer", () -> raw(admin.topics().getStats(plain)));
        step("internal_stats_with_consumer", () -> raw(admin.topics().getInternalStats(plain)));
        step("delete_subscription_with_consumer", () -> {
            admin.topics().deleteSubscription(plain, "live-sub");
            return null;
        });
        step("delete_subscription_forced", () -> {
            admin.topics().deleteSubscription(plain, "live-sub", true);
            return admin.topics().getSubscriptions(plain);
        });
        consumer.close();
        step("delete_missing_subscription", () -> {
            admin.topics().deleteSubscription(plain, "live-sub");
            return null;
        });

        Producer<byte[]> partProducer = client.newProducer().topic(part).enableBatching(false).create();
        for (int i = 0; i < 8; i++) {
            partProducer.newMessage().key("k" + i).value(("p" + i).getBytes(UTF_8)).send();
        }
        partProducer.close();
        step("create_partitioned_subscription", () -> {
            admin.topics().createSubscription(part, "part-sub", MessageId.earliest);
            return admin.topics().getSubscriptions(part);
        });
        step("partitioned_stats", () -> raw(admin.topics().getPartitionedStats(part, true)));
        step("partitioned_internal_stats", () -> raw(admin.topics().getPartitionedInternalStats(part)));
        step("peek_partitioned", () -> messages(admin.topics().peekMessages(part, "part-sub", 1)));
        step("compaction_status", () -> admin.topics().compactionStatus(plain).status.toString());
        step("delete_with_producer", () -> {
            admin.topics().delete(plain);
            return null;
        });
        Consumer<byte[]> tail = client.newConsumer().topic(plain).subscriptionName("end-sub")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
        for (int i = 0; i < 10; i++) {
            tail.acknowledge(tail.receive((int) WAIT_SECONDS, SECONDS));
        }
        obs.put("end_of_topic_before", tail.hasReachedEndOfTopic());
        step("terminate", () -> admin.topics().terminateTopic(plain).toString());
        long deadline = System.currentTimeMillis() + 5000;
        while (!tail.hasReachedEndOfTopic() && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
        }
        obs.put("end_of_topic_after", tail.hasReachedEndOfTopic());
        tail.close();
        step("send_after_terminate", () -> producer.send("late".getBytes(UTF_8)).toString());
        step("internal_stats_terminated", () -> raw(admin.topics().getInternalStats(plain)));
        step("create_producer_after_terminate", () -> {
            client.newProducer().topic(plain).create().close();
            return null;
        });
        step("delete_partitioned_as_plain", () -> {
            admin.topics().deletePartitionedTopic(plain);
            return null;
        });
        producer.close();
        step("delete_plain", () -> {
            admin.topics().delete(plain);
            return null;
        });
        step("stats_after_delete", () -> raw(admin.topics().getStats(plain)));
        step("delete_partitioned", () -> {
            admin.topics().deletePartitionedTopic(part);
            return null;
        });
        step("partitions_after_delete", () -> admin.topics().getPartitionedTopicMetadata(part).partitions);
        step("list_after_delete", () -> admin.topics().getList(namespace));
    }

    // -- transactions ---------------------------------------------------------------------------------------

    private void transactions(String topic) throws Exception {
        String sub = "txn-sub";
        Producer<byte[]> producer = client.newProducer().topic(topic).sendTimeout(0, SECONDS).enableBatching(false)
                .create();
        for (int i = 0; i < 3; i++) {
            producer.send(("plain-" + i).getBytes(UTF_8));
        }
        Consumer<byte[]> consumer = client.newConsumer().topic(topic).subscriptionName(sub)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
        Transaction txn = client.newTransaction().withTransactionTimeout(60, SECONDS).build()
                .get(WAIT_SECONDS, SECONDS);
        TxnID id = txn.getTxnID();
        obs.put("txn_id", List.of(id.getMostSigBits(), id.getLeastSigBits()));
        producer.newMessage(txn).value("in-txn-0".getBytes(UTF_8)).send();
        producer.newMessage(txn).value("in-txn-1".getBytes(UTF_8)).send();
        Message<byte[]> acked = consumer.receive((int) WAIT_SECONDS, SECONDS);
        consumer.acknowledgeAsync(acked.getMessageId(), txn).get(WAIT_SECONDS, SECONDS);
        MessageIdAdv position = (MessageIdAdv) acked.getMessageId();
        obs.put("acked", List.of(position.getLedgerId(), position.getEntryId()));

        step("coordinators", () -> raw(admin.transactions().listTransactionCoordinators()));
        step("coordinator_stats", () -> raw(admin.transactions().getCoordinatorStats()));
        step("coordinator_stats_by_id", () -> raw(admin.transactions().getCoordinatorStatsById(
                (int) id.getMostSigBits())));
        step("coordinator_stats_missing", () -> raw(admin.transactions().getCoordinatorStatsById(999)));
        step("coordinator_internal_stats", () -> raw(admin.transactions().getCoordinatorInternalStats(
                (int) id.getMostSigBits(), false)));
        step("metadata", () -> raw(admin.transactions().getTransactionMetadata(id)));
        step("slow", () -> raw(admin.transactions().getSlowTransactions(0, TimeUnit.MILLISECONDS)));
        step("slow_none", () -> raw(admin.transactions().getSlowTransactions(1, TimeUnit.HOURS)));
        step("buffer_stats", () -> raw(admin.transactions().getTransactionBufferStats(topic, true, false)));
        step("buffer_internal_stats", () -> raw(admin.transactions().getTransactionBufferInternalStats(topic,
                false)));
        step("in_buffer", () -> raw(admin.transactions().getTransactionInBufferStats(id, topic)));
        step("pending_ack_stats", () -> raw(admin.transactions().getPendingAckStats(topic, sub, true)));
        step("pending_ack_internal_stats", () -> raw(admin.transactions().getPendingAckInternalStats(topic, sub,
                false)));
        step("in_pending_ack", () -> raw(admin.transactions().getTransactionInPendingAckStats(id, topic, sub)));
        step("position_pending", () -> raw(admin.transactions().getPositionStatsInPendingAck(topic, sub,
                position.getLedgerId(), position.getEntryId(), null)));
        step("topic_stats_open", () -> raw(admin.topics().getStats(topic)));
        txn.commit().get(WAIT_SECONDS, SECONDS);
        step("metadata_after_commit", () -> raw(admin.transactions().getTransactionMetadata(id)));
        step("buffer_stats_after_commit", () -> raw(admin.transactions().getTransactionBufferStats(topic)));
        step("pending_ack_after_commit", () -> raw(admin.transactions().getPendingAckStats(topic, sub)));
        step("position_after_commit", () -> raw(admin.transactions().getPositionStatsInPendingAck(topic, sub,
                position.getLedgerId(), position.getEntryId(), null)));

        Transaction second = client.newTransaction().withTransactionTimeout(60, SECONDS).build()
                .get(WAIT_SECONDS, SECONDS);
        producer.newMessage(second).value("aborted-0".getBytes(UTF_8)).send();
        TxnID secondId = second.getTxnID();
        step("abort_by_admin", () -> {
            admin.transactions().abortTransaction(secondId);
            return null;
        });
        step("metadata_after_abort", () -> raw(admin.transactions().getTransactionMetadata(secondId)));
        Transaction third = client.newTransaction().withTransactionTimeout(1, SECONDS).build()
                .get(WAIT_SECONDS, SECONDS);
        producer.newMessage(third).value("timed-out-0".getBytes(UTF_8)).send();
        TxnID thirdId = third.getTxnID();
        Thread.sleep(2500);
        step("metadata_after_timeout", () -> raw(admin.transactions().getTransactionMetadata(thirdId)));
        step("buffer_stats_after_abort", () -> raw(admin.transactions().getTransactionBufferStats(topic)));
        step("topic_stats_after", () -> raw(admin.topics().getStats(topic)));
        List<String> received = new ArrayList<>();
        Message<byte[]> next;
        while ((next = consumer.receive(1, SECONDS)) != null) {
            received.add(new String(next.getData(), UTF_8));
            consumer.acknowledge(next);
        }
        obs.put("received_after", received);
        consumer.close();
        producer.close();
    }

    // -- schemas --------------------------------------------------------------------------------------------

    private static final String RECORD_V1 = "{\"type\":\"record\",\"name\":\"Point\",\"fields\":["
            + "{\"name\":\"x\",\"type\":\"int\"}]}";
    private static final String RECORD_V2 = "{\"type\":\"record\",\"name\":\"Point\",\"fields\":["
            + "{\"name\":\"x\",\"type\":\"int\"},{\"name\":\"y\",\"type\":\"int\",\"default\":0}]}";
    private static final String RECORD_BAD = "{\"type\":\"record\",\"name\":\"Point\",\"fields\":["
            + "{\"name\":\"z\",\"type\":\"string\"}]}";

    private static SchemaInfo avro(String definition) {
        return SchemaInfo.builder().name("Point").type(SchemaType.AVRO).schema(definition.getBytes(UTF_8))
                .properties(Map.of("owner", "harness")).build();
    }

    private static Map<String, Object> info(SchemaInfo info) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("type", info.getType().name());
        out.put("schema", new String(info.getSchema(), UTF_8));
        out.put("properties", info.getProperties());
        return out;
    }

    /** Upload, read, list, test and delete a topic's schema; a producer sees what the admin API changed. */
    private void schemas(String topic) {
        step("create_topic", () -> {
            admin.topics().createNonPartitionedTopic(topic);
            return null;
        });
        step("get_none", () -> info(admin.schemas().getSchemaInfo(topic)));
        step("upload_v1", () -> {
            admin.schemas().createSchema(topic, avro(RECORD_V1));
            return null;
        });
        step("latest_v1", () -> {
            var latest = admin.schemas().getSchemaInfoWithVersion(topic);
            return Map.of("version", latest.getVersion(), "info", info(latest.getSchemaInfo()));
        });
        step("upload_v2", () -> {
            admin.schemas().createSchema(topic, avro(RECORD_V2));
            return null;
        });
        step("upload_v2_again", () -> {
            admin.schemas().createSchema(topic, avro(RECORD_V2));
            return null;
        });
        step("version_0", () -> info(admin.schemas().getSchemaInfo(topic, 0)));
        step("all", () -> admin.schemas().getAllSchemas(topic).stream().map(AdminHarness::info).toList());
        step("set_strategy", () -> {
            admin.namespaces().setSchemaCompatibilityStrategy(namespaceOf(topic), SchemaCompatibilityStrategy.BACKWARD);
            return null;
        });
        step("test_compatible", () -> {
            var answer = admin.schemas().testCompatibility(topic, avro(RECORD_V2));
            return Map.of("compatible", answer.isCompatibility(), "strategy", answer.getSchemaCompatibilityStrategy());
        });
        step("test_incompatible", () -> admin.schemas().testCompatibility(topic, avro(RECORD_BAD)).isCompatibility());
        step("upload_incompatible", () -> {
            admin.schemas().createSchema(topic, avro(RECORD_BAD));
            return null;
        });
        step("string_producer_refused", () -> {
            client.newProducer(Schema.STRING).topic(topic).create().close();
            return "created";
        });
        step("delete", () -> {
            admin.schemas().deleteSchema(topic);
            return null;
        });
        step("get_deleted", () -> info(admin.schemas().getSchemaInfo(topic)));
        step("all_after_delete", () -> admin.schemas().getAllSchemas(topic).size());
        step("string_producer_after_delete", () -> {
            try (var producer = client.newProducer(Schema.STRING).topic(topic).create()) {
                return producer.send("after delete").toString();
            }
        });
        step("latest_after_producer", () -> {
            var latest = admin.schemas().getSchemaInfoWithVersion(topic);
            return Map.of("version", latest.getVersion(), "info", info(latest.getSchemaInfo()));
        });
        step("delete_force", () -> {
            admin.schemas().deleteSchema(topic, true);
            return null;
        });
        step("get_after_force", () -> info(admin.schemas().getSchemaInfo(topic)));
        step("upload_after_force", () -> {
            admin.schemas().createSchema(topic, avro(RECORD_V1));
            return admin.schemas().getSchemaInfoWithVersion(topic).getVersion();
        });
    }

    private static String namespaceOf(String topic) {
        String path = topic.substring(topic.indexOf("://") + 3);
        return path.substring(0, path.lastIndexOf('/'));
    }

    // -- topic policies -------------------------------------------------------------------------------------

    /** Set, read (own and applied) and remove a partitioned topic's policies; a partition and a missing topic. */
    private void topicPolicies(String topic) {
        var policies = admin.topicPolicies();
        step("create_partitioned", () -> {
            admin.topics().createPartitionedTopic(topic, 2);
            return null;
        });
        step("get_ttl_unset", () -> policies.getMessageTTL(topic));
        step("set_ttl", () -> {
            policies.setMessageTTL(topic, 30);
            return null;
        });
        step("get_ttl", () -> policies.getMessageTTL(topic));
        step("get_ttl_applied", () -> policies.getMessageTTL(topic, true));
        step("set_retention", () -> {
            policies.setRetention(topic, new RetentionPolicies(60, 100));
            return null;
        });
        step("get_retention", () -> raw(policies.getRetention(topic)));
        step("set_deduplication", () -> {
            policies.setDeduplicationStatus(topic, true);
            return null;
        });
        step("get_deduplication", () -> policies.getDeduplicationStatus(topic));
        step("set_compaction_threshold", () -> {
            policies.setCompactionThreshold(topic, 1048576);
            return null;
        });
        step("get_compaction_threshold", () -> policies.getCompactionThreshold(topic));
        step("set_backlog_quota", () -> {
            policies.setBacklogQuota(topic, BacklogQuota.builder().limitSize(10485760)
                    .retentionPolicy(BacklogQuota.RetentionPolicy.producer_exception).build(),
                    BacklogQuota.BacklogQuotaType.destination_storage);
            return null;
        });
        step("get_backlog_quota_map", () -> raw(policies.getBacklogQuotaMap(topic)));
        step("get_backlog_quota_map_applied", () -> raw(policies.getBacklogQuotaMap(topic, true)));
        step("set_ttl_on_partition", () -> {
            policies.setMessageTTL(topic + "-partition-0", 10);
            return null;
        });
        step("get_ttl_missing_topic", () -> policies.getMessageTTL(topic + "-missing"));
        step("remove_ttl", () -> {
            policies.removeMessageTTL(topic);
            return null;
        });
        step("get_ttl_after_remove", () -> policies.getMessageTTL(topic));
        step("remove_backlog_quota", () -> {
            policies.removeBacklogQuota(topic, BacklogQuota.BacklogQuotaType.destination_storage);
            return null;
        });
        step("remove_retention", () -> {
            policies.removeRetention(topic);
            return null;
        });
        step("remove_deduplication", () -> {
            policies.removeDeduplicationStatus(topic);
            return null;
        });
        step("remove_compaction_threshold", () -> {
            policies.removeCompactionThreshold(topic);
            return null;
        });
        step("get_retention_after_remove", () -> raw(policies.getRetention(topic)));
    }

    // -- lookup, clusters, brokers ---------------------------------------------------------------------------

    private void status(String topic) {
        String part = topic + "-part";
        step("lookup", () -> admin.lookups().lookupTopic(topic));
        step("create_partitioned", () -> {
            admin.topics().createPartitionedTopic(part, 2);
            return null;
        });
        step("lookup_partitioned", () -> admin.lookups().lookupPartitionedTopic(part));
        step("clusters", () -> admin.clusters().getClusters());
        step("cluster", () -> raw(admin.clusters().getCluster("standalone")));
        step("cluster_missing", () -> raw(admin.clusters().getCluster("nowhere")));
        step("brokers", () -> admin.brokers().getActiveBrokers("standalone"));
        step("leader", () -> raw(admin.brokers().getLeaderBroker()));
        step("health", () -> {
            admin.brokers().healthcheck();
            return "ok";
        });
        step("version", () -> admin.brokers().getVersion());
        step("runtime_configuration", () -> admin.brokers().getRuntimeConfigurations());
    }
}
