"""Run catalogue scenarios against a broker: probe what it offers, run each scenario, classify its outcome.

Every scenario ends as one of :data:`OUTCOMES`:

- ``pass``: its normalised observations equal the reference's (the golden files recorded from Apache Pulsar, another
  golden directory, or a live reference broker);
- ``differs``: they do not; each differing observation is listed with the reference's value and the broker's;
- ``error``: the scenario could not run to its end (a client or harness failure; the root cause is kept, e.g. the
  Java exception's class and message);
- ``unsupported``: it needs something the probe found absent (an admin API, a transaction coordinator...);
- ``not-run``: it needs a restart and no restart command was given, its client's toolchain is missing, or there is
  no reference outcome for it.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import socket
import subprocess
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pulsar_txn_proxy.conformance import harness, security
from pulsar_txn_proxy.conformance.catalogue import Entry
from pulsar_txn_proxy.conformance.framework import (
    GOLDEN_DIR,
    KNOWN_DIFFERENCES,
    PULSAR_VERSION,
    Run,
    Target,
    admin_call,
    flatten,
)

OUTCOMES = ("pass", "differs", "error", "unsupported", "not-run")
_ABSENT = "(absent)"


@dataclass
class Capability:
    """What the probe found for one need."""

    available: bool
    detail: str


@dataclass
class Result:
    """How one scenario ended."""

    entry: Entry
    outcome: str
    reason: str = ""
    differences: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    #: The full text of an error (a harness's output, a Python traceback).
    details: str = ""
    #: The normalised outcome observed (kept when recording goldens).
    observed: Any = None


@dataclass
class Reference:
    """What a scenario's outcome is compared with: golden files, or a live broker."""

    name: str
    version: str
    golden: dict[str, dict[str, Any]] = field(default_factory=dict)
    target: Target | None = None

    def outcome(self, entry: Entry) -> tuple[bool, Any]:
        """(found, outcome); a live reference runs the scenario now."""
        if self.target is not None:
            return True, observe(self.target, entry)
        module = self.golden.get(entry.module, {})
        return entry.name in module, module.get(entry.name)


def load_golden_dir(directory: Path) -> tuple[dict[str, dict[str, Any]], str]:
    """Golden files of a directory (``<module>.json``) and the Pulsar version they were recorded from."""
    golden: dict[str, dict[str, Any]] = {}
    versions = set()
    for path in sorted(directory.glob("*.json")):
        data = json.loads(path.read_text())
        meta = data.pop("_meta", {})
        if meta.get("pulsar_version"):
            versions.add(str(meta["pulsar_version"]))
        golden[path.stem] = data
    return golden, ", ".join(sorted(versions)) or "unknown"


def packaged_reference() -> Reference:
    golden, version = load_golden_dir(GOLDEN_DIR)
    return Reference(f"Apache Pulsar {PULSAR_VERSION} (golden files)", version or PULSAR_VERSION, golden)


# -- probing -----------------------------------------------------------------------------------------------


def reachable(service_url: str, timeout: float = 5.0) -> str | None:
    """None when the broker's port accepts a connection, else why not."""
    parsed = urlparse(service_url)
    if parsed.scheme not in ("pulsar", "pulsar+ssl") or not parsed.hostname:
        return f"{service_url!r} is not a pulsar://host:port URL"
    try:
        socket.create_connection((parsed.hostname, parsed.port or 6650), timeout=timeout).close()
    except OSError as exc:
        return f"cannot connect to {service_url}: {exc}"
    return None


def _probe_admin(target: Target) -> Capability:
    if not target.admin_url:
        return Capability(False, "no --admin-url given")
    try:
        answer = admin_call(target.admin_url, "GET", "/admin/v2/clusters", timeout=10)
    except OSError as exc:
        return Capability(False, f"GET /admin/v2/clusters failed: {exc}")
    if answer.status != 200:
        return Capability(False, f"GET /admin/v2/clusters answered {answer.status}")
    return Capability(True, f"clusters {answer.body}")


#: The system topic whose partitions stand for the transaction coordinators.
TC_ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"


def _probe_transactions(target: Target) -> Capability:
    from pulsar_txn_proxy.conformance.raw import RawConnection, end_txn, new_txn, rid, tc_connect
    from wire.pulsar_api_pb2 import BaseCommand, ServerError, TxnAction

    try:
        conn = RawConnection.to(target.service_url, timeout=15)
    except OSError as exc:
        return Capability(False, f"cannot connect: {exc}")
    try:
        conn.handshake()
        # As the official clients do: a lookup of the coordinator's assign topic partition (Pulsar then owns its
        # bundle and loads the coordinator), then TC_CLIENT_CONNECT, again while the coordinator is not ready yet.
        conn.send(BaseCommand.LOOKUP, topic=f"{TC_ASSIGN_TOPIC}-partition-0", request_id=rid())
        conn.expect(BaseCommand.LOOKUP_RESPONSE)
        deadline = time.monotonic() + 30
        while (answer := tc_connect(conn, 0)).HasField("error"):
            if answer.error != ServerError.ServiceNotReady or time.monotonic() > deadline:
                return Capability(
                    False,
                    f"TC_CLIENT_CONNECT to coordinator 0 answered {ServerError.Name(answer.error)}: {answer.message}",
                )
            time.sleep(0.5)
        response = new_txn(conn)
        if response.HasField("error"):
            return Capability(False, f"NEW_TXN answered {ServerError.Name(response.error)}: {response.message}")
        end_txn(conn, (response.txnid_most_bits, response.txnid_least_bits), TxnAction.ABORT)
        return Capability(True, "coordinator 0 granted a transaction")
    except (OSError, AssertionError) as exc:
        return Capability(False, f"no transaction coordinator answered: {str(exc).splitlines()[0]}")
    finally:
        conn.close()


def _probe_partitioned(target: Target) -> Capability:
    from pulsar_txn_proxy.conformance.raw import RawConnection, rid
    from wire.pulsar_api_pb2 import BaseCommand, ServerError

    topic = f"persistent://public/default/conformance-probe-{uuid.uuid4().hex[:8]}"
    try:
        conn = RawConnection.to(target.service_url, timeout=15)
    except OSError as exc:
        return Capability(False, f"cannot connect: {exc}")
    try:
        conn.handshake()
        conn.send(BaseCommand.PARTITIONED_METADATA, topic=topic, request_id=rid())
        answer = conn.expect(BaseCommand.PARTITIONED_METADATA_RESPONSE).partitionMetadataResponse
        if answer.HasField("error"):
            return Capability(False, f"PARTITIONED_METADATA answered {ServerError.Name(answer.error)}")
        return Capability(True, "PARTITIONED_METADATA answered")
    except (OSError, AssertionError) as exc:
        return Capability(False, f"PARTITIONED_METADATA got no answer: {str(exc).splitlines()[0]}")
    finally:
        conn.close()


def _probe_schemas(target: Target) -> Capability:
    from pulsar.schema import StringSchema

    topic = f"persistent://public/default/conformance-probe-{uuid.uuid4().hex[:8]}"
    run = Run(target)
    try:
        run.client(operation_timeout_seconds=15).create_producer(topic, schema=StringSchema()).close()
        return Capability(True, "a producer with a STRING schema was accepted")
    except Exception as exc:
        return Capability(False, f"a producer with a STRING schema was refused: {type(exc).__name__}: {exc}")
    finally:
        run.close()


def _probe_compaction(target: Target, admin: Capability) -> Capability:
    if not admin.available or not target.admin_url:
        return Capability(False, "needs the admin API")
    name = f"conformance-probe-{uuid.uuid4().hex[:8]}"
    run = Run(target)
    try:
        run.client(operation_timeout_seconds=15).create_producer(f"persistent://public/default/{name}").close()
    except Exception as exc:
        return Capability(False, f"cannot create a topic to compact: {type(exc).__name__}: {exc}")
    finally:
        run.close()
    answer = admin_call(target.admin_url, "PUT", f"/admin/v2/persistent/public/default/{name}/compaction")
    if answer.status < 300 or answer.status == 409:
        return Capability(True, f"PUT .../compaction answered {answer.status}")
    return Capability(False, f"PUT .../compaction answered {answer.status}")


def _probe_tls(target: Target) -> Capability:
    from pulsar_txn_proxy.conformance.raw import RawConnection

    if urlparse(target.service_url).scheme != "pulsar+ssl":
        return Capability(False, "the service URL is not pulsar+ssl://")
    try:
        conn = RawConnection.to(target.service_url, timeout=15)
    except OSError as exc:
        return Capability(False, f"no TLS connection: {exc}")
    try:
        conn.handshake()
        return Capability(True, f"TLS connection ({conn.sock.version()})")  # type: ignore[attr-defined]
    except (OSError, AssertionError) as exc:
        return Capability(False, f"no CONNECTED over TLS: {str(exc).splitlines()[0]}")
    finally:
        conn.close()


def _probe_auth(target: Target) -> Capability:
    """Credentials were given and the broker takes them (a CONNECT carrying them is answered CONNECTED)."""
    from pulsar_txn_proxy.conformance.raw import RawConnection

    credentials = security.for_url(target.service_url)
    if not credentials.method:
        return Capability(False, "no --auth-plugin or --token given")
    if credentials.method == "other":
        return Capability(True, f"{credentials.auth_plugin} given (the official clients use it)")
    try:
        conn = RawConnection.to(target.service_url, timeout=15)
    except OSError as exc:
        return Capability(False, f"cannot connect: {exc}")
    try:
        conn.handshake()
        return Capability(True, f"CONNECT with {credentials.method} credentials answered CONNECTED")
    except (OSError, AssertionError) as exc:
        return Capability(False, f"CONNECT with {credentials.method} credentials: {str(exc).splitlines()[0]}")
    finally:
        conn.close()


#: How this endpoint names itself in CONNECTED's ``server_version`` (``pulsar-txn-proxy <version>``).
ENDPOINT_SERVER_VERSION = "pulsar-txn-proxy "


def server_version(target: Target) -> str:
    """The ``server_version`` of the broker's CONNECTED (``Pulsar Server4.2.4`` for Apache Pulsar), or ``""``."""
    from pulsar_txn_proxy.conformance.raw import RawConnection

    try:
        conn = RawConnection.to(target.service_url, timeout=15)
    except OSError:
        return ""
    try:
        return conn.handshake().connected.server_version
    except (OSError, AssertionError):
        return ""
    finally:
        conn.close()


def is_this_endpoint(version: str) -> bool:
    """Whether a CONNECTED ``server_version`` is this endpoint's: only then are its deliberate differences from
    Pulsar (``KNOWN_DIFFERENCES``) excused; any other broker is compared on every observation."""
    return version.startswith(ENDPOINT_SERVER_VERSION)


def broker_version(target: Target) -> str:
    """The version the broker's admin API reports (``/admin/v2/brokers/version``), or ``unknown``."""
    if target.admin_url:
        with contextlib.suppress(OSError):
            answer = admin_call(target.admin_url, "GET", "/admin/v2/brokers/version", timeout=10)
            if answer.status == 200 and answer.body:
                return str(answer.body)
    return "unknown"


def ensure_namespace(target: Target) -> list[str]:
    """Create ``public/default`` through the admin API when it is missing; what was done or assumed."""
    if not target.admin_url:
        return ["no admin API: the tenant `public` and namespace `public/default` are assumed to exist"]
    notes = []
    tenants = admin_call(target.admin_url, "GET", "/admin/v2/tenants")
    if tenants.status == 200 and "public" not in (tenants.body or []):
        clusters = admin_call(target.admin_url, "GET", "/admin/v2/clusters").body or []
        answer = admin_call(
            target.admin_url, "PUT", "/admin/v2/tenants/public", {"adminRoles": [], "allowedClusters": clusters}
        )
        notes.append(f"created the tenant `public` (allowed clusters {clusters}): {answer.status}")
    namespaces = admin_call(target.admin_url, "GET", "/admin/v2/namespaces/public")
    if namespaces.status == 200 and "public/default" not in (namespaces.body or []):
        answer = admin_call(target.admin_url, "PUT", "/admin/v2/namespaces/public/default")
        notes.append(f"created the namespace `public/default`: {answer.status}")
    return notes


def probe(target: Target) -> dict[str, Capability]:
    """What the broker offers, need by need (see ``catalogue.NEEDS``)."""
    admin = _probe_admin(target)
    found = {
        "admin": admin,
        "partitioned": _probe_partitioned(target),
        "schemas": _probe_schemas(target),
        "compaction": _probe_compaction(target, admin),
        "transactions": _probe_transactions(target),
        "tls": _probe_tls(target),
        "auth": _probe_auth(target),
    }
    if target.crash_restart is not None:
        found["restart"] = Capability(True, "--restart-command given")
    else:
        found["restart"] = Capability(False, "no --restart-command given")
    return found


def restarter(command: str, service_url: str, admin_url: str | None, timeout: float = 600) -> Callable[[], None]:
    """A ``crash_restart`` that runs a shell command and waits until the broker (and its admin API) answer again."""

    def restart() -> None:
        result = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=timeout, check=False)
        if result.returncode != 0:
            raise RuntimeError(
                f"--restart-command {shlex.quote(command)} exited with {result.returncode}: "
                f"{(result.stderr or result.stdout).strip()[-2000:]}"
            )
        deadline = time.monotonic() + timeout
        while reachable(service_url, timeout=2) is not None or (
            admin_url and not _probe_admin(Target("", service_url, admin_url)).available
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the broker did not answer within {timeout} s of --restart-command")
            time.sleep(0.2)

    return restart


# -- running -----------------------------------------------------------------------------------------------


@dataclass
class Failure:
    """A scenario that did not run to its end."""

    cause: str
    details: str


def _root_cause(exc: BaseException) -> str:
    if isinstance(exc, harness.HarnessError):
        return exc.cause
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def observe(target: Target, entry: Entry) -> Any:
    """The scenario's normalised outcome on a target, or a :class:`Failure`."""
    run = Run(target)
    try:
        outcome = entry.fn(run)
    except Exception as exc:
        return Failure(_root_cause(exc), "".join(traceback.format_exception(exc))[-20000:])
    finally:
        run.close()
    return run.normalise(outcome)


def differences(ours: Any, reference: Any, ignored: dict[str, str]) -> list[dict[str, Any]]:
    """Each differing observation (``a.b[0]`` paths): the reference's value and the broker's."""
    if isinstance(ours, dict) and isinstance(reference, dict):
        ours = {k: v for k, v in ours.items() if k not in ignored}
        reference = {k: v for k, v in reference.items() if k not in ignored}
    if ours == reference:
        return []
    flat_ours, flat_reference = flatten(ours), flatten(reference)
    rows = []
    for path in dict.fromkeys([*flat_reference, *flat_ours]):
        theirs = flat_reference.get(path, _ABSENT) if path in flat_reference else _ABSENT
        mine = flat_ours.get(path, _ABSENT) if path in flat_ours else _ABSENT
        if path not in flat_reference or path not in flat_ours or theirs != mine:
            rows.append({"observation": path or "(outcome)", "reference": theirs, "broker": mine})
    return rows


def unmet_needs(entry: Entry, capabilities: dict[str, Capability]) -> list[str]:
    return [need for need in entry.needs if need != "restart" and not capabilities[need].available]


#: Per harness client that cannot run here: the outcome its scenarios get (``not-run`` for a missing toolchain,
#: ``error`` for a failed build) and why.
Unavailable = dict[str, tuple[str, str]]


def precheck(entry: Entry, capabilities: dict[str, Capability]) -> Result | None:
    """The outcome of a scenario the broker cannot run (``unsupported``, ``not-run``), or None."""
    unmet = unmet_needs(entry, capabilities)
    if unmet:
        why = "; ".join(f"{need}: {capabilities[need].detail}" for need in unmet)
        return Result(entry, "unsupported", f"the broker lacks {', '.join(unmet)} ({why})")
    if "restart" in entry.needs and not capabilities["restart"].available:
        return Result(entry, "not-run", "restarts the broker: give --restart-command to run it")
    return None


def run_entry(
    entry: Entry,
    target: Target,
    reference: Reference,
    capabilities: dict[str, Capability],
    unavailable: Unavailable,
    record: bool = False,
    excuse_known: bool = False,
) -> Result:
    """Classify one scenario on the target (running it only when it can run); ``record``: keep its outcome
    instead of comparing it (``pass`` when it ran to its end); ``excuse_known``: the target is this endpoint,
    whose deliberate differences from Pulsar (``KNOWN_DIFFERENCES``) are left out of the comparison."""
    if (skipped := precheck(entry, capabilities)) is not None:
        return skipped
    for client in entry.clients:
        if client in unavailable:
            outcome, why = unavailable[client]
            return Result(entry, outcome, f"the {client} client cannot run here: {why}")
    started = time.monotonic()
    ours = observe(target, entry)
    if isinstance(ours, Failure):
        return Result(entry, "error", ours.cause, seconds=time.monotonic() - started, details=ours.details)
    if record:
        return Result(entry, "pass", "recorded", seconds=time.monotonic() - started, observed=ours)
    found, theirs = reference.outcome(entry)
    seconds = time.monotonic() - started
    if isinstance(theirs, Failure):
        return Result(
            entry, "error", f"on the reference broker: {theirs.cause}", seconds=seconds, details=theirs.details
        )
    if not found:
        return Result(
            entry, "not-run", f"no reference outcome recorded for {entry.module}.{entry.name}", seconds=seconds
        )
    if isinstance(theirs, dict) and "$failed" in theirs:
        return Result(entry, "error", f"the reference outcome is a failure: {theirs['$failed']}", seconds=seconds)
    known = KNOWN_DIFFERENCES.get(f"{entry.module}.{entry.name}", {}) if excuse_known else {}
    rows = differences(ours, theirs, known)
    if rows:
        return Result(entry, "differs", f"{len(rows)} observation{'s' if len(rows) > 1 else ''} differ", rows, seconds)
    excused = [key for key in known if differences(ours, theirs, {k: "" for k in known if k != key})]
    if excused:
        return Result(entry, "pass", f"this endpoint's known differences excused: {', '.join(excused)}", [], seconds)
    return Result(entry, "pass", seconds=seconds)


def prepare_harnesses(clients: set[str]) -> Unavailable:
    """Build the Java and Go harnesses that will be used (first use only); which clients cannot run, and why."""
    unavailable: Unavailable = {}
    for client, check, build in (
        ("java", harness.java_toolchain, harness.java_classpath),
        ("go", harness.go_toolchain, harness.go_binary),
    ):
        if client not in clients:
            continue
        if (missing := check()) is not None:
            unavailable[client] = ("not-run", missing)
            continue
        try:
            build()
        except harness.ToolchainMissingError as exc:
            unavailable[client] = ("not-run", str(exc))
        except (harness.HarnessError, OSError, subprocess.SubprocessError) as exc:
            unavailable[client] = ("error", f"its harness did not build: {_root_cause(exc)}")
            harness.progress(str(exc)[-4000:])
    return unavailable
