"""Lookup and status: ``/lookup/v2/topic/...``, clusters, brokers and health.

With these, a client given ``http://host:<admin port>`` as its service URL finds the broker over HTTP (the C++
client's HTTP lookup also asks ``/admin/v2/{domain}/{t}/{ns}/{topic}/partitions`` and, for schemas,
``/admin/v2/schemas/{t}/{ns}/{topic}/schema``), then speaks the binary protocol to the URL it was given.
"""

from __future__ import annotations

from typing import Any

from engine.errors import BrokerError
from engine.names import TopicName
from proxy.admin.context import AdminContext
from proxy.admin.http import TEXT, AdminError, Call, Router, text_reply


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
        }
