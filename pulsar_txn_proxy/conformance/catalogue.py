"""The scenario catalogue: every scenario of ``pulsar_txn_proxy.conformance.scenarios`` with a stable id and tags.

A scenario is a function ``test_<name>(run: Run) -> Outcome`` decorated with ``@scenario`` in one of the modules
of :data:`AREAS`. Its id is ``<area>.<name>`` with dashes (``transactions.abort-invisible``); its golden outcome is
stored under ``<module>.json`` / ``<name>`` as before. What it drives (``clients``) and what it needs from the broker
(``needs``) are read off its code, so that a new scenario is catalogued without a registration step: the Java or Go
harness it calls, the admin API, partitioned topics, schemas, compaction, transactions, a broker restart. The
project's own tests (``tests/conformance/test_scenarios.py``) and the ``pulsar-txn-proxy conformance`` command both
walk this catalogue: one source of scenarios.
"""

from __future__ import annotations

import fnmatch
import importlib
import types
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pulsar_txn_proxy.conformance import harness
from pulsar_txn_proxy.conformance.framework import Scenario

PULSAR_DOCS = "https://pulsar.apache.org/docs/4.2.x/"


@dataclass(frozen=True)
class Area:
    """A scenario module: what it checks, the Pulsar documentation or PIP it checks against, and what every one of
    its scenarios needs whatever its code shows."""

    module: str
    title: str
    reference: str
    needs: tuple[str, ...] = ()


#: The scenario modules, in the order scenarios run and are listed.
AREAS: tuple[Area, ...] = (
    Area(
        "core",
        "core messaging: order, batching, routing, acks, compression, schemas, delays, chunking",
        PULSAR_DOCS + "concepts-messaging/",
    ),
    Area(
        "subscriptions",
        "subscription types: Exclusive, Failover, Shared, Key_Shared",
        PULSAR_DOCS + "concepts-messaging/#subscription-types",
    ),
    Area("seek_readers", "readers and seeks", PULSAR_DOCS + "concepts-clients/#reader-interface"),
    Area("message_ids", "message ids off the wire and the admin API", PULSAR_DOCS + "concepts-messaging/#message-id"),
    Area("admin", "admin REST API calls", PULSAR_DOCS + "admin-api-overview/", ("admin",)),
    Area(
        "dead_letter",
        "dead-letter topics and a producer's initial subscription",
        PULSAR_DOCS + "concepts-messaging/#dead-letter-topic",
    ),
    Area("schema_compat", "schema compatibility strategies", PULSAR_DOCS + "schema-understand/", ("schemas", "admin")),
    Area(
        "topic_watch",
        "topic-list watchers and GET_TOPICS_OF_NAMESPACE (PIP-145)",
        "https://github.com/apache/pulsar/issues/14691",
    ),
    Area("listeners", "lookups naming an advertised listener", PULSAR_DOCS + "concepts-multiple-advertised-listeners/"),
    Area(
        "message_size",
        "the max message size, batching and chunking by it",
        PULSAR_DOCS + "concepts-messaging/#chunking",
    ),
    Area(
        "routes",
        "topic policies, limits and the less common admin routes",
        PULSAR_DOCS + "admin-api-topics/",
        ("admin",),
    ),
    Area(
        "admin_bodies",
        "admin request bodies as Pulsar's Jackson reads them, on every route that takes one",
        PULSAR_DOCS + "admin-api-overview/",
        ("admin",),
    ),
    Area(
        "hostile_frames",
        "frames official clients do not send: SEND metadata without its required fields",
        PULSAR_DOCS + "developing-binary-protocol/",
    ),
    Area("backlog_quota", "backlog quotas", PULSAR_DOCS + "cookbooks-retention-expiry/#backlog-quotas", ("admin",)),
    Area("topic_policies", "topic policies: set, read, applied", PULSAR_DOCS + "admin-api-topics/", ("admin",)),
    Area(
        "retention",
        "retention: acknowledged data kept or deleted, through trims and unloads",
        PULSAR_DOCS + "cookbooks-retention-expiry/#retention-policies",
        ("admin",),
    ),
    Area("compaction", "topic compaction", PULSAR_DOCS + "concepts-topic-compaction/", ("admin", "compaction")),
    Area(
        "response_fields",
        "the fields each answer of the binary protocol sets",
        PULSAR_DOCS + "developing-binary-protocol/",
    ),
    Area("transactions", "transactions through the Java client (PIP-31)", PULSAR_DOCS + "txn-what/", ("transactions",)),
    Area(
        "txn_acks",
        "transactional acknowledgements in batches and after aborts",
        PULSAR_DOCS + "txn-how/",
        ("transactions",),
    ),
    Area(
        "txn_coordinator",
        "the transaction coordinator's answers, timeouts and low-water marks",
        PULSAR_DOCS + "txn-how/",
        ("transactions",),
    ),
    Area(
        "go_client",
        "the official Go client: batches, acks, transactions, seek, readers",
        PULSAR_DOCS + "client-libraries-go/",
    ),
    Area(
        "python_txn_client",
        "transactions through a Python transactional client",
        PULSAR_DOCS + "txn-use/",
        ("transactions",),
    ),
    Area(
        "reconnect",
        "a consumer coming back to a partly acknowledged batch",
        PULSAR_DOCS + "developing-binary-protocol/#flow-control",
    ),
    Area(
        "credentials",
        "authentication: missing and forged credentials refused, the given ones accepted",
        PULSAR_DOCS + "security-overview/",
        ("auth",),
    ),
    Area(
        "client_lines",
        "older lines of the Java client (4.0 LTS, 3.3) on the transaction scenarios",
        PULSAR_DOCS + "client-libraries-java/",
        ("transactions",),
    ),
)

#: Everything a scenario may need, in the order they are reported.
NEEDS = ("admin", "partitioned", "schemas", "compaction", "transactions", "tls", "auth", "restart")
CLIENTS = ("python", "java", "go")


@dataclass(frozen=True)
class Entry:
    """One scenario of the catalogue."""

    id: str
    area: str
    module: str
    name: str
    summary: str
    clients: tuple[str, ...]
    needs: tuple[str, ...]
    reference: str
    fn: Scenario

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "area": self.area,
            "summary": self.summary,
            "clients": list(self.clients),
            "needs": list(self.needs),
            "reference": self.reference,
            "golden": f"{self.module}.{self.name}",
        }

    def matches(self, pattern: str) -> bool:
        """Whether a pattern names it: a glob (``txn*``, ``core.*``) or a prefix of its id (``core``)."""
        return fnmatch.fnmatchcase(self.id, pattern) or self.id.startswith(pattern)


def _dashed(name: str) -> str:
    return name.replace("_", "-")


def _code_tokens(fn: Any, module: types.ModuleType, seen: set[int]) -> tuple[set[str], set[str], list[Any]]:
    """Names, string constants and module-level objects a scenario's code reaches (helpers of scenario modules
    followed), without the docstrings."""
    names: set[str] = set()
    strings: set[str] = set()
    objects: list[Any] = []
    if id(fn) in seen:
        return names, strings, objects
    seen.add(id(fn))
    codes = []
    if isinstance(fn, types.FunctionType):
        codes.append(fn.__code__)
    elif isinstance(fn, type):
        codes.extend(v.__code__ for v in vars(fn).values() if isinstance(v, types.FunctionType))
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        doc = code.co_consts[0] if code.co_consts and isinstance(code.co_consts[0], str) else None
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                codes.append(const)
            elif isinstance(const, str) and const is not doc:
                strings.add(const)
    namespace = getattr(fn, "__globals__", None) or vars(module)
    for name in list(names):
        value = namespace.get(name)
        if value is None:
            continue
        objects.append(value)
        owner = getattr(value, "__module__", "") or ""
        if owner.startswith(f"{__package__}.scenarios") and isinstance(value, types.FunctionType | type):
            more = _code_tokens(value, importlib.import_module(owner), seen)
            names |= more[0]
            strings |= more[1]
            objects += more[2]
    return names, strings, objects


def _tags(fn: Scenario, module: types.ModuleType, area: Area) -> tuple[tuple[str, ...], tuple[str, ...]]:
    names, strings, objects = _code_tokens(fn, module, set())
    clients = set()
    if any(o is harness.run_scenario or o is harness.client_line_classpath for o in objects):
        clients.add("java")
    if any(o is harness.go_scenario for o in objects):
        clients.add("go")
    if names & {"client", "RawConnection", "Raw", "Client", "admin", "admin_call"} or not clients:
        clients.add("python")
    words = " ".join(sorted(names | strings)).lower()
    needs = set(area.needs)
    if names & {"admin", "admin_call", "admin_url"} or any(s.startswith("/admin/") for s in strings):
        needs.add("admin")
    if "partitioned_topic" in names or any(s.endswith("/partitions") for s in strings):
        needs |= {"partitioned", "admin"}
    if "schema" in words:
        needs.add("schemas")
    if "compact" in words:
        needs.add("compaction")
    if "txn" in words or "transaction" in words:
        needs.add("transactions")
    if "crash_restart" in names:
        needs.add("restart")
    return (tuple(c for c in CLIENTS if c in clients), tuple(n for n in NEEDS if n in needs))


def _scenarios(module: types.ModuleType) -> Iterable[tuple[str, Scenario]]:
    for attr, value in vars(module).items():
        fn = getattr(value, "scenario", None)
        if attr.startswith("test_") and fn is not None and getattr(value, "__module__", None) == module.__name__:
            yield attr.removeprefix("test_"), fn


def load() -> list[Entry]:
    """The whole catalogue, area by area in :data:`AREAS` order, each area's scenarios in source order."""
    entries = []
    for area in AREAS:
        module = importlib.import_module(f"{__package__}.scenarios.{area.module}")
        for name, fn in _scenarios(module):
            clients, needs = _tags(fn, module, area)
            summary = " ".join((fn.__doc__ or "").split())
            entries.append(
                Entry(
                    f"{_dashed(area.module)}.{_dashed(name)}",
                    _dashed(area.module),
                    area.module,
                    name,
                    summary,
                    clients,
                    needs,
                    area.reference,
                    fn,
                )
            )
    return entries


def select(entries: list[Entry], only: list[str], skip: list[str]) -> list[Entry]:
    """The entries named by any ``only`` pattern (all when none), minus those named by a ``skip`` pattern."""
    chosen = [e for e in entries if not only or any(e.matches(p) for p in only)]
    return [e for e in chosen if not any(e.matches(p) for p in skip)]
