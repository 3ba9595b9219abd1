"""Lookup and status: ``/lookup/v2/topic/...``, clusters, brokers and health.

With these, a client given ``http://host:<admin port>`` as its service URL finds the broker over HTTP (the C++
client's HTTP lookup also asks ``/admin/v2/{domain}/{t}/{ns}/{topic}/partitions`` and, for schemas,
``/admin/v2/schemas/{t}/{ns}/{topic}/schema``), then speaks the binary protocol to the URL it was given.
"""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

from engine import backlog_quota
from engine.clock import now_ms
from engine.errors import BrokerError
from engine.names import TopicName
from proxy.admin.bodies import as_object
from proxy.admin.context import AdminContext
from proxy.admin.dynamic_settings import DYNAMIC_SETTINGS
from proxy.admin.http import TEXT, AdminError, Call, Reply, Router, absent_reply, text_reply

#: Store metadata kinds: dynamic broker settings set through the admin API, and a cluster's failure domains.
_DYNAMIC = "dynamic_config"
_FAILURE_DOMAINS = "failure_domain"


def register(router: Router, ctx: AdminContext) -> None:
    """Add the lookup, cluster and broker routes."""
    broker = ctx.broker

    def require_cluster(cluster: str) -> None:
        if cluster != ctx.cluster:
            raise AdminError(404, "Cluster does not exist")

    @router.route("GET", "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}")
    def lookup(call: Call) -> Any:
        try:
            name = TopicName.parse(f"{call['domain']}://{call['tenant']}/{call['namespace']}/{call['topic']}")
        except BrokerError:
            raise AdminError(412, "Topic name is not valid") from None
        if name.namespace_name not in broker.namespaces:
            raise AdminError(404, f"Namespace not found: {name.namespace_name}")
        try:
            url, url_tls = ctx.service.lookup_urls(call.query.get("listenerName", ""), ctx.host(call.host))
        except BrokerError as exc:
            # As Pulsar: a listener it does not advertise fails the lookup with an unexpected error.
            raise AdminError(500, exc.message) from None
        return {
            "brokerUrl": url or "",
            "brokerUrlTls": url_tls or "",
            "httpUrl": ctx.web_url(call.host),
            "httpUrlTls": ctx.web_url_tls(call.host),
            "nativeUrl": url or "",
        }

    @router.route("GET", "/admin/v2/clusters")
    def clusters(call: Call) -> Any:
        return [ctx.cluster]

    @router.route("GET", "/admin/v2/clusters/{cluster}")
    def cluster(call: Call) -> Any:
        require_cluster(call["cluster"])
        urls = {"serviceUrl": ctx.web_url(call.host)}
        if ctx.admin_tls_port is not None:
            urls["serviceUrlTls"] = ctx.web_url_tls(call.host)
        urls["brokerServiceUrl"] = ctx.broker_url(call.host)
        if ctx.service.tls_port is not None:
            urls["brokerServiceUrlTls"] = ctx.broker_url_tls(call.host)
        return {
            **urls,
            "brokerClientTlsEnabled": False,
            "tlsAllowInsecureConnection": False,
            "brokerClientTlsEnabledWithKeyStore": False,
            "brokerClientTlsTrustStoreType": "JKS",
            "brokerClientTlsKeyStoreType": "JKS",
        }

    def active_brokers(call: Call) -> list[str]:
        return [f"{ctx.host(call.host)}:{ctx.admin_port}"]

    @router.route("GET", "/admin/v2/brokers")
    def brokers(call: Call) -> Any:
        return active_brokers(call)

    @router.route("GET", "/admin/v2/brokers/{cluster}")
    def brokers_of(call: Call) -> Any:
        require_cluster(call["cluster"])
        return active_brokers(call)

    @router.route("GET", "/admin/v2/brokers/leaderBroker")
    def leader(call: Call) -> Any:
        broker_id = active_brokers(call)[0]
        return {"serviceUrl": ctx.web_url(call.host), "brokerId": broker_id}

    @router.route("GET", "/admin/v2/brokers/health")
    def health(call: Call) -> Any:
        # A round trip through the group commit proves the store takes writes.
        broker.request_flush()
        return ctx.committed(text_reply("ok", TEXT))

    @router.route("GET", "/admin/v2/brokers/ready")
    def ready(call: Call) -> Any:
        return text_reply("ok", TEXT)

    @router.route("GET", "/admin/v2/brokers/version")
    def version(call: Call) -> Any:
        return text_reply(ctx.service.server_version, TEXT)

    store = broker.store

    @router.route("GET", "/admin/v2/brokers/configuration")
    def dynamic_names(call: Call) -> Any:
        return sorted(DYNAMIC_SETTINGS)

    @router.route("GET", "/admin/v2/brokers/configuration/values")
    def dynamic_values(call: Call) -> Any:
        return store.metadata(_DYNAMIC)

    @router.route("POST", "/admin/v2/brokers/configuration/{name}/{value}")
    def set_dynamic(call: Call) -> Any:
        """Store a dynamic setting as Pulsar does (it checks the name, not the value); it is reported, not applied."""
        if call["name"] not in DYNAMIC_SETTINGS:
            raise AdminError(412, "Can't update non-dynamic configuration")
        store.put_metadata(_DYNAMIC, call["name"], call["value"])
        return absent_reply()

    @router.route("DELETE", "/admin/v2/brokers/configuration/{name}")
    def delete_dynamic(call: Call) -> Any:
        if call["name"] not in DYNAMIC_SETTINGS:
            raise AdminError(412, "Can't delete non-dynamic configuration")
        store.put_metadata(_DYNAMIC, call["name"], None)
        return absent_reply()

    @router.route("GET", "/admin/v2/brokers/internal-configuration")
    def internal_configuration(call: Call) -> Any:
        # No metadata store nor bookies: the URLs a client could use are none.
        return {"metadataStoreUrl": "", "configurationMetadataStoreUrl": "", "ledgersRootPath": "/ledgers"}

    @router.route("GET", "/admin/v2/brokers/backlog-quota-check")
    def backlog_quota_check(call: Call) -> Any:
        """Apply the backlog quotas now, as the periodic check does."""
        now = now_ms(broker.clock)
        for topic in list(broker.topics.values()):
            if topic.name.namespace_name in broker.namespaces:
                quotas = broker.namespaces.backlog_quotas(topic.name)
                if quotas:
                    backlog_quota.enforce(topic, quotas, now)
        return None

    @router.route("GET", "/admin/v2/brokers/{cluster}/{broker_id}/ownedNamespaces")
    def owned_namespaces(call: Call) -> Any:
        """Every bundle of every namespace, all owned by this endpoint (its only broker)."""
        if call["broker_id"] not in active_brokers(call):
            raise AdminError(404, f"Broker id '{call['broker_id']}' not found in available brokers.")
        status = {"broker_assignment": "shared", "is_controlled": False, "is_active": True}
        owned = {}
        for namespace in broker.namespaces.names():
            bounds = broker.namespaces.policies(namespace)["bundles"]["boundaries"]
            for low, high in pairwise(bounds):
                owned[f"{namespace}/{low}_{high}"] = dict(status)
        return owned

    # -- failure domains ---------------------------------------------------------------------------

    def domains() -> dict[str, Any]:
        return {name: json.loads(value) for name, value in store.metadata(_FAILURE_DOMAINS).items()}

    @router.route("GET", "/admin/v2/clusters/{cluster}/failureDomains")
    def failure_domains(call: Call) -> Any:
        # As Pulsar: the domains of a cluster that does not exist are none.
        return domains() if call["cluster"] == ctx.cluster else {}

    @router.route("GET", "/admin/v2/clusters/{cluster}/failureDomains/{domain}")
    def failure_domain(call: Call) -> Any:
        require_cluster(call["cluster"])
        found = domains().get(call["domain"])
        if found is None:
            raise AdminError(404, f"Domain {call['domain']} for cluster {call['cluster']} does not exist")
        return found

    @router.route("POST", "/admin/v2/clusters/{cluster}/failureDomains/{domain}")
    def set_failure_domain(call: Call) -> Any:
        require_cluster(call["cluster"])
        given = call.json(required=True)
        if given is None:
            return Reply(204)  # Jackson reads null: Pulsar's resource does nothing with it
        body = as_object(given, "FailureDomain")
        members = body.get("brokers") or []
        if not isinstance(members, list) or not all(isinstance(b, str) for b in members):
            raise AdminError(400, "Cannot deserialize the body as FailureDomain")
        for other, domain in domains().items():
            shared = sorted(set(domain.get("brokers", [])) & set(members))
            if other != call["domain"] and shared:
                raise AdminError(409, f"Domain [{other}] has already broker {shared[0]}")
        # A domain read without brokers (null) keeps none, and Pulsar writes it without the field.
        stored = {} if body.get("brokers") is None else {"brokers": members}
        store.put_metadata(_FAILURE_DOMAINS, call["domain"], json.dumps(stored))
        return Reply(204)

    @router.route("DELETE", "/admin/v2/clusters/{cluster}/failureDomains/{domain}")
    def delete_failure_domain(call: Call) -> Any:
        require_cluster(call["cluster"])
        if call["domain"] not in domains():
            raise AdminError(404, f"Domain-name {call['domain']} or cluster {call['cluster']} does not exist")
        store.put_metadata(_FAILURE_DOMAINS, call["domain"], None)
        return absent_reply()

    @router.route("GET", "/admin/v2/brokers/configuration/runtime")
    def runtime_configuration(call: Call) -> Any:
        config = broker.config
        return {
            "clusterName": config.cluster,
            "brokerServicePort": str(ctx.service.port),
            "webServicePort": str(ctx.admin_port),
            "transactionCoordinatorEnabled": "true",
            "brokerDeduplicationEnabled": str(config.deduplication).lower(),
            "allowAutoTopicCreation": str(config.auto_topic_creation).lower(),
            "allowAutoTopicCreationType": "partitioned" if config.default_partitions > 0 else "non-partitioned",
            "defaultNumPartitions": str(max(config.default_partitions, 1)),
            **store.metadata(_DYNAMIC),
        }
