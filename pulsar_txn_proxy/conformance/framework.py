"""Scenarios written once, run against several targets, their observable outcomes normalised and compared.

A *target* is a running broker: this endpoint (started by the fixtures), the Maven-started Apache Pulsar, or any
``--service-url``/``--admin-url``. A scenario is a function ``test_x(run: Run) -> dict`` decorated with
:func:`scenario`; it drives the target through official clients (Python; Java for transactions) and returns what it
observed: payloads in arrival order, error types, admin answers. :class:`Run` hands out unique topic names and
records message ids so that :func:`normalise` can replace everything that legitimately differs between brokers
(random names, ledger ids, transaction ids) with stable placeholders. The outcomes of two targets, or of one target
and the golden file recorded from real Pulsar, must then be equal; a difference fails with a side-by-side table.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import traceback
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulsar

from pulsar_txn_proxy.conformance import security

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
#: The release the golden files were recorded with (the pulsar-broker pom's version).
PULSAR_VERSION = "4.2.4"
_LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
_MAX_LONG = 2**63 - 1

Outcome = dict[str, Any]

#: Observations where this endpoint deliberately differs from Pulsar (scenario -> top-level key -> why). They are
#: left out of the comparison; everything else in those scenarios is still compared.
KNOWN_DIFFERENCES: dict[str, dict[str, str]] = {
    "transactions.batch_index_ack_conflict": {
        "txn6_ack_first": (
            "txn5 holds pending acks on the last two messages of a batch (the first two are acknowledged); txn6 "
            "acks one of them again. Pulsar 4.2.4 accepts it, reproducibly, and both transactions commit: its "
            "pending-ack conflict check (PendingAckHandleImpl, PositionAckSetUtil.isAckSetOverlap) misses a batch "
            "whose remaining messages one transaction acknowledged, so two transactions acknowledge one message "
            "(pitfall 7 of shared/docs/transaction-pitfalls.md; related reports: apache/pulsar#15832, #16032). This "
            "endpoint answers TransactionConflictException, as for any other message already in pending ack: a "
            "message acknowledged by two committed transactions is consumed twice, which a transaction must prevent."
        ),
        "txn6_commit_error": "follows from txn6_ack_first: a transaction with a failed ack cannot commit",
    },
    "authentication.raw_untrusted_client_certificate": {
        "alert_descriptions": (
            "a client certificate that does not verify ends the TLS handshake (1.2) or the session after it (1.3) "
            "with an alert on both; Pulsar's (netty's OpenSSL engine, its trust manager throwing) says "
            "internal_error, this endpoint's (OpenSSL's verification through pyOpenSSL, which cannot choose the "
            "alert) unknown_ca. Clients see a failed connection either way and retry it"
        )
    },
    "admin_bodies.unserved_route_bodies": {
        key: (
            "not served here: these admin routes answer 501 with a reason (proxy/admin/unsupported.py; README, Ro"
            "utes not served), so the bodies they take are not read"
        )
        for key in ("topic_routes", "migration", "bulk_grants", "isolation_policies")
    },
    "response_fields.fields_of_answers": {
        "connect_features": (
            "CONNECTED's feature flags announce what the broker supports; this endpoint announces what it has of them, "
            "topic-list watchers (supports_topic_watchers): partitioned metadata without auto-creation, the watchers' "
            "reconcile and replication dedup by ledger and entry id are not built (issue 23), and a client told of "
            "them would use them."
        ),
    },
    "go_client.batch_after_txn": {
        "send_error": (
            "After a transaction commits, the Go client 0.19.0 sends its batching producer's next plain batches with "
            "that ended transaction's id in CommandSend. Pulsar 4.2.4 appends them to the ended transaction, and then "
            "delivers no plain message on the partition (seen for 10 s, any producer). This endpoint refuses a send "
            "in a committed transaction (NotAllowedError; the Go client drops its producer on it, so the send times "
            "out): appending it would end in an abort that also hides the transaction's committed messages."
        ),
    },
    **{
        f"go_client.{name}": {
            "after_end": (
                "A transaction acknowledges m-0..m-4 of a batch message by message and aborts. Pulsar 4.2.4 never "
                "delivers m-0..m-4 again (not after redelivery, nor to a new consumer, nor 8 s later): the abort "
                "loses them. This endpoint releases an aborted transaction's acknowledgements, so all ten come back."
            ),
            "after_resubscribe": "follows from after_end: the aborted acknowledgements are released here",
        }
        for name in ("txn_batch_ack_abort", "txn_batch_ack_abort_shared")
    },
    **{
        f"go_client.{name}": {
            "after_end": (
                "Pulsar 4.2.4 delivers the messages of an aborted transaction that the Go client 0.19.0 sent: that "
                "client puts the transaction id in CommandSend only, not in the MessageMetadata that Pulsar's "
                "dispatcher reads to skip aborted data (apache/pulsar-client-go#1498). This endpoint takes a send's "
                "transaction from CommandSend, as Pulsar's transaction buffer does, and never delivers aborted data."
            ),
        }
        for name in ("txn_produce_abort", "txn_produce_abort_batched")
    },
}


def log_clients_to(path: Path) -> None:
    """Write the official Python client's warnings and errors to a file instead of the terminal."""
    global _LOGGER
    _LOGGER = pulsar.FileLogger(pulsar.LoggerLevel.Warn, str(path))


@dataclass
class Target:
    """A broker to run scenarios against."""

    name: str
    service_url: str
    admin_url: str | None = None
    #: ``kill -9`` and start again on the same data; None where the suite cannot do that (a user's URL).
    crash_restart: Callable[[], None] | None = None


@dataclass
class AdminAnswer:
    """Status and decoded body of an admin REST call."""

    status: int
    body: Any

    def summary(self) -> dict[str, Any]:
        """Status plus the body when it is JSON data (error texts differ between implementations)."""
        return {"status": self.status, "body": self.body if self.status < 300 else None}


def admin_call(
    admin_url: str,
    method: str,
    path: str,
    body: Any = None,
    timeout: float = 15.0,
    content_type: str = "application/json",
) -> AdminAnswer:
    """One admin REST request (JSON in and out; a ``bytes`` body is sent as it is)."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        admin_url.rstrip("/") + path,
        data=data,
        method=method,
        headers={"Content-Type": content_type, "Accept": "application/json"},
    )
    try:
        with admin_open(admin_url, request, timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    text = raw.decode(errors="replace")
    try:
        decoded = json.loads(text) if text.strip() else None
    except ValueError:
        decoded = text
    return AdminAnswer(status, decoded)


def admin_open(admin_url: str, request: urllib.request.Request | str, timeout: float) -> Any:
    """``urlopen`` of an admin API request with the TLS and authentication settings registered for ``admin_url``
    (:mod:`.security`)."""
    credentials = security.for_url(admin_url)
    if isinstance(request, str):
        request = urllib.request.Request(request)
    for name, value in credentials.http_headers().items():
        request.add_header(name, value)
    context = credentials.ssl_context() if request.full_url.startswith("https:") else None
    return urllib.request.urlopen(request, timeout=timeout, context=context)


def wait_for_admin(admin_url: str, timeout: float = 60.0) -> None:
    """Wait until the admin API answers (it may start listening a little after the Pulsar port)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if admin_call(admin_url, "GET", "/admin/v2/clusters", timeout=2).status == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the admin API at {admin_url} did not answer within {timeout} s")
        time.sleep(0.05)


@dataclass
class Run:
    """One scenario on one target: unique names, clients that are closed afterwards, recorded ids."""

    target: Target
    suffix: str = field(default_factory=lambda: uuid.uuid4().hex[:10])
    _clients: list[pulsar.Client] = field(default_factory=list)
    _names: dict[str, str] = field(default_factory=dict)

    # -- names -------------------------------------------------------------------------------------

    def topic(self, tag: str) -> str:
        """A fresh persistent topic in public/default; outcomes show it as ``<tag>``."""
        name = f"persistent://public/default/{tag}-{self.suffix}"
        self._names[name] = f"<{tag}>"
        self._names[f"{tag}-{self.suffix}"] = f"<{tag}>"
        return name

    def partitioned_topic(self, tag: str, partitions: int) -> str:
        """A fresh partitioned topic, created through the admin API."""
        name = self.topic(tag)
        answer = self.admin("PUT", f"/admin/v2/persistent/public/default/{tag}-{self.suffix}/partitions", partitions)
        if answer.status >= 300:
            raise RuntimeError(f"creating partitioned topic {name} failed: {answer}")
        return name

    def name(self, tag: str) -> str:
        """A fresh name for anything else (subscription, producer); outcomes show ``<tag>``."""
        value = f"{tag}-{self.suffix}"
        self._names[value] = f"<{tag}>"
        return value

    def namespace(self, tag: str) -> tuple[str, int]:
        """A fresh namespace ``<tag>/ns`` of a fresh tenant, so that no other scenario finds it in a list of
        namespaces; its name and the status creating it answered."""
        tenant = self.name(tag)
        self.admin("PUT", f"/admin/v2/tenants/{tenant}", {"adminRoles": [], "allowedClusters": ["standalone"]})
        namespace = f"{tenant}/ns"
        return namespace, self.admin("PUT", f"/admin/v2/namespaces/{namespace}").status

    # -- clients -----------------------------------------------------------------------------------

    def client(self, url: str | None = None, **kwargs: Any) -> pulsar.Client:
        """An official Python client on the target, or on another ``url`` of it (closed when the scenario ends), with
        the TLS and authentication settings of that URL, else of the target; ``kwargs`` override them."""
        kwargs.setdefault("operation_timeout_seconds", 10)
        url = url or self.target.service_url
        settings = security.for_url(url)
        if settings is security.NONE:  # another URL of the target (a listener's, a TLS port's)
            settings = self.credentials
        kwargs = {**settings.python_client_kwargs(), **kwargs}
        made = pulsar.Client(url, logger=_LOGGER, **kwargs)
        self._clients.append(made)
        return made

    @property
    def credentials(self) -> security.Credentials:
        """The TLS and authentication settings of the target's service URL (:mod:`.security`)."""
        return security.for_url(self.target.service_url)

    def admin(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> AdminAnswer:
        """An admin REST call on the target (fails when the target has no admin URL); a ``bytes`` body is sent as
        it is."""
        if not self.target.admin_url:
            raise RuntimeError(f"target {self.target.name} has no admin URL")
        return admin_call(self.target.admin_url, method, path, body, content_type=content_type)

    def close(self) -> None:
        for made in self._clients:
            with contextlib.suppress(Exception):  # closing after a failed scenario must not mask its outcome
                made.close()
        self._clients.clear()

    # -- recording ---------------------------------------------------------------------------------

    @staticmethod
    def mid(message_id: pulsar.MessageId, topic: str | None = None) -> dict[str, Any]:
        """A message id for :func:`normalise` (ranked per topic: ledger ids differ between brokers)."""
        return {
            "$mid": [message_id.ledger_id(), message_id.entry_id(), message_id.partition(), message_id.batch_index()],
            "topic": topic,
        }

    @staticmethod
    def msg(message: pulsar.Message, **extra: Any) -> dict[str, Any]:
        """Payload, key, properties, redelivery count and id of a received message."""
        out: dict[str, Any] = {"data": message.data().decode(errors="replace")}
        if message.partition_key():
            out["key"] = message.partition_key()
        if message.properties():
            out["props"] = dict(sorted(message.properties().items()))
        if message.redelivery_count():
            out["redelivered"] = message.redelivery_count()
        out["id"] = Run.mid(message.message_id(), message.topic_name())
        out.update(extra)
        return out

    @staticmethod
    def attempt(step: Callable[[], Any]) -> Any:
        """The step's value, or ``{"error": <exception class>}`` when it raised."""
        try:
            value = step()
        except Exception as exc:
            return {"error": type(exc).__name__}
        return {"ok": value}

    def normalise(self, outcome: Any) -> Any:
        return normalise(outcome, self._names)


# -- normalisation ------------------------------------------------------------------------------------


def _walk(value: Any, visit: Callable[[Any], Any]) -> Any:
    value = visit(value)
    if isinstance(value, dict):
        return {k: _walk(v, visit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(v, visit) for v in value]
    return value


def _partition_of(topic: str | None) -> str | None:
    if topic is None:
        return None
    match = re.search(r"-partition-(\d+)$", topic)
    return match.group(1) if match else None


def normalise(outcome: Any, names: dict[str, str]) -> Any:
    """Replace unique names (in values and in keys) with their tags and message ids with per-topic ranks.

    A message id becomes ``"<rank>"`` (0 for the first entry this scenario saw on that topic partition), with
    ``".<batch index>"`` for a message in a batch and ``"@<partition>"`` for a partition of a partitioned topic;
    earliest/latest markers become ``"earliest"``/``"latest"``.
    """
    ids: dict[str, set[tuple[int, int]]] = {}

    def key_of(raw: list[int], topic: str | None) -> str:
        partition = raw[2] if raw[2] >= 0 else _partition_of(topic)
        base = re.sub(r"-partition-\d+$", "", topic or "")
        return f"{base}#{partition}"

    def collect(value: Any) -> Any:
        if isinstance(value, dict) and "$mid" in value:
            raw = value["$mid"]
            if raw[0] >= 0 and raw[0] != _MAX_LONG:
                ids.setdefault(key_of(raw, value.get("topic")), set()).add((raw[0], raw[1]))
        return value

    _walk(outcome, collect)
    ranks = {k: {pos: i for i, pos in enumerate(sorted(v))} for k, v in ids.items()}
    ordered = sorted(names, key=len, reverse=True)

    def replace(value: Any) -> Any:
        if isinstance(value, dict) and "$mid" in value:
            raw = value["$mid"]
            if raw[0] == _MAX_LONG:
                return "latest"
            if raw[0] < 0:
                return "earliest"
            text = str(ranks[key_of(raw, value.get("topic"))][(raw[0], raw[1])])
            if raw[3] >= 0:
                text += f".{raw[3]}"
            partition = raw[2] if raw[2] >= 0 else _partition_of(value.get("topic"))
            if partition is not None and int(partition) >= 0:
                text += f"@{partition}"
            return text
        if isinstance(value, str):
            return renamed(value)
        if isinstance(value, dict):  # names in keys too (a map keyed by topic)
            return {renamed(k) if isinstance(k, str) else k: v for k, v in value.items()}
        return value

    def renamed(text: str) -> str:
        for name in ordered:
            if name in text:
                text = text.replace(name, names[name])
        return text

    return _walk(outcome, replace)


# -- comparing ---------------------------------------------------------------------------------------


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """``{"a.b[0]": leaf}`` for every leaf; empty containers are leaves."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{path}.{k}" if path else str(k)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{path}[{i}]"))
        return out
    return {path: value}


def _cell(value: Any, missing: bool, width: int) -> str:
    text = "(absent)" if missing else json.dumps(value, sort_keys=True)
    return text if len(text) <= width else text[: width - 1] + "…"


def side_by_side(name: str, left: Any, right: Any, left_name: str, right_name: str, width: int = 48) -> str | None:
    """None when equal, else a table of the differing leaves (and the full outcomes below it)."""
    if left == right:
        return None
    flat_left, flat_right = flatten(left), flatten(right)
    paths = list(dict.fromkeys([*flat_left, *flat_right]))
    rows = [
        (
            path,
            _cell(flat_left.get(path), path not in flat_left, width),
            _cell(flat_right.get(path), path not in flat_right, width),
        )
        for path in paths
        if path not in flat_left or path not in flat_right or flat_left[path] != flat_right[path]
    ]
    path_width = max(len("observation"), *(len(r[0]) for r in rows))
    lines = [
        f"scenario {name}: {len(rows)} of {len(paths)} observations differ",
        f"{'observation':<{path_width}} | {left_name:<{width}} | {right_name}",
        f"{'-' * path_width}-+-{'-' * width}-+-{'-' * width}",
        *(f"{p:<{path_width}} | {a:<{width}} | {b}" for p, a, b in rows),
        "",
        f"{left_name}: {json.dumps(left, sort_keys=True)}",
        f"{right_name}: {json.dumps(right, sort_keys=True)}",
    ]
    return "\n".join(lines)


# -- golden files ------------------------------------------------------------------------------------


def golden_path(module: str) -> Path:
    return GOLDEN_DIR / f"{module}.json"


def load_golden(module: str) -> dict[str, Any]:
    path = golden_path(module)
    if not path.exists():
        return {}
    return json.loads(path.read_text())


def save_golden(module: str, scenario_name: str, outcome: Any, recorded_from: str) -> None:
    """Store one scenario's outcome from real Pulsar (files are sorted, one per test module)."""
    data = load_golden(module)
    data["_meta"] = {"recorded_from": recorded_from, "pulsar_version": PULSAR_VERSION}
    data[scenario_name] = outcome
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    golden_path(module).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


# -- running -----------------------------------------------------------------------------------------


def run_on(target: Target, fn: Callable[[Run], Outcome]) -> Any:
    """Run a scenario on a target and normalise its outcome; an exception is an outcome too."""
    run = Run(target)
    try:
        outcome: Any = fn(run)
    except Exception as exc:
        outcome = {"$failed": type(exc).__name__, "$trace": traceback.format_exc(limit=4)[-1500:]}
    finally:
        run.close()
    return run.normalise(outcome)


Scenario = Callable[[Run], Outcome]


def scenario(fn: Scenario) -> Callable[..., None]:
    """Make a pytest test of a scenario: it runs on every selected target and compares (see conftest.py)."""

    def test(conformance: Any) -> None:
        conformance.check(fn)

    test.__name__ = fn.__name__
    test.__qualname__ = fn.__qualname__
    test.__doc__ = fn.__doc__
    test.__module__ = fn.__module__
    test.scenario = fn  # type: ignore[attr-defined]
    return test


# -- client helpers ----------------------------------------------------------------------------------

#: How long "nothing more arrives" is watched for.
QUIET_MS = 500
#: How long a scenario waits for a state it expects (a message, a stats figure, a trim) before it observes what is
#: there: generous, so that a loaded machine observes the same; a broker that never gets there only costs this wait.
SETTLE_S = 30.0


def until(probe: Callable[[], Any], done: Callable[[Any], bool], timeout: float = SETTLE_S, every: float = 0.1) -> Any:
    """``probe()`` again until ``done`` holds of its value or ``timeout`` seconds have passed; its last value (what the
    scenario observes either way, so a broker that never reaches the state still shows as different)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(every)


def drain(
    source: pulsar.Consumer | pulsar.Reader,
    quiet_ms: int = QUIET_MS,
    limit: int = 10_000,
    first_ms: int = 0,
    expect: int = 0,
) -> list[pulsar.Message]:
    """Every message a consumer or reader gets until ``quiet_ms`` passes with none (``first_ms``, if longer, for the
    first: a consumer that has just subscribed to a busy broker may wait longer for its first dispatch). The first
    ``expect`` messages (as many as Pulsar delivers there) are each waited for up to ``SETTLE_S``: a loaded machine's
    pause between two of them does not end the drain early, and a broker that delivers fewer still shows fewer."""
    receive = source.read_next if isinstance(source, pulsar.Reader) else source.receive
    received: list[pulsar.Message] = []
    while len(received) < limit:
        wait_ms = int(SETTLE_S * 1000) if len(received) < expect else quiet_ms if received else max(quiet_ms, first_ms)
        try:
            received.append(receive(wait_ms))
        except pulsar.Timeout:
            break
    return received


def drain_each(sources: list[pulsar.Consumer], quiet_ms: int = QUIET_MS, expect: int = 0) -> list[list[pulsar.Message]]:
    """What each consumer of a subscription gets, as ``drain`` does for one: the first ``expect`` messages (as many as
    Pulsar delivers there, across them all, however it shares them out) are waited for up to ``SETTLE_S`` in all,
    then each is drained until ``quiet_ms`` passes with none."""
    got: list[list[pulsar.Message]] = [[] for _ in sources]
    deadline = time.monotonic() + SETTLE_S
    while sum(map(len, got)) < expect and time.monotonic() < deadline:
        for index, source in enumerate(sources):
            with contextlib.suppress(pulsar.Timeout):
                got[index].append(source.receive(50))
    for index, source in enumerate(sources):
        got[index] += drain(source, quiet_ms)
    return got


def receive_n(source: pulsar.Consumer | pulsar.Reader, count: int) -> list[pulsar.Message]:
    """Up to ``count`` messages (as many as Pulsar delivers there), waiting at most ``SETTLE_S`` for each."""
    return drain(source, limit=count, expect=count)


def texts(messages: list[pulsar.Message]) -> list[str]:
    """The payloads as text."""
    return [m.data().decode(errors="replace") for m in messages]


def send_all(producer: pulsar.Producer, payloads: list[str], **kwargs: Any) -> list[pulsar.MessageId]:
    """Synchronous sends; their ids."""
    return [producer.send(p.encode(), **kwargs) for p in payloads]
