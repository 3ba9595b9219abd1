"""The official Python client's own test suite (``github.com/apache/pulsar-client-python``, ``tests/``) against this
endpoint and against Apache Pulsar 4.2.4, each configured as that suite's CI broker, one broker at a time.

    python -m tests.python_suite [--target endpoint|pulsar|both] [--source REPO] [--ref TAG] [--results DIR]

The suite's files come from a git repository of pulsar-client-python (``--source``: a clone or a bare mirror; cloned
from GitHub into the work directory when missing) at the tag of the installed ``pulsar-client`` (``v3.13.0``, or its
last release candidate when the tag was never pushed). What the suite expects of its broker (its
``tests/test-conf/standalone-ssl.conf`` and ``build-support/start-test-service-inside-container.sh``): ports 6650,
6651 (TLS), 8080 and 8443 (https) on ``localhost``; the certificates of ``tests/test-conf``; TLS, token (a fresh
secret key; the token of ``token-principal`` in ``tests/.test-token.txt``) and basic (``tests/test-conf/.htpasswd``)
authentication; authorization with super-users ``localhost``, ``superUser`` and ``admin``, anonymous clients as role
``anonymous``; messages up to 1,024,000 bytes; no transaction coordinator, no topic-level policies. Then the
tenant ``public`` is administered by ``anonymous``, which may produce and consume in ``public/default`` and
``public/default-2``; tenant ``private`` has a namespace ``private/auth`` where ``token-principal`` may produce and
consume.

Each target runs in a network namespace of its own (``unshare -n``, root needed), so that the fixed ports clash with
nothing else on the machine. The files are those the suite's ``tests/run-unit-tests.sh`` runs against that broker
(``oauth2_test.py`` needs a broker set up otherwise and an OAuth2 server on the Internet: not run). Each test runs in
a process of its own (``python -m unittest file.Class.test``, as the CI runs the files with ``unittest``): a test
that hangs or takes the process down ends only its own run. Each target writes ``<results>/<target>.txt``: one
``PASS|FAIL|SKIP <file>::<Class>::<test>`` line per test, and ``<target>.log`` with the full output; the comparison
writes ``summary.md`` (a table per file and target) and ``pass-on-pulsar-not-here.txt`` (the tests that pass on
Pulsar and fail, or do not run, here).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import io
import json
import os
import secrets
import signal
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, TextIO

from tests.go_suite import report_pass_on_pulsar_not_here

ROOT = Path(__file__).resolve().parent.parent
REPOSITORY = "https://github.com/apache/pulsar-client-python"
#: The files ``tests/run-unit-tests.sh`` runs against the CI broker, in its order.
FILES = (
    "custom_logger_test.py",
    "debug_logger_test.py",
    "interrupted_test.py",
    "auto_cluster_failover_test.py",
    "pulsar_test.py",
    "schema_test.py",
    "table_view_test.py",
    "reader_test.py",
    "asyncio_test.py",
)
#: How long one test may run before its process is killed (the suite's CI gives the whole job 120 minutes).
TEST_KILL_SECONDS = 240
#: Role of the token the suite's tests use (``private/auth`` grants it produce and consume).
TOKEN_SUBJECT = "token-principal"


# -- outside: the suite's source --------------------------------------------------------------------------------


def client_version() -> str:
    return importlib.metadata.version("pulsar-client")


def _git(source: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(source), *args], capture_output=True, text=True, check=True).stdout


def release_ref(source: Path, version: str) -> str:
    """The tag of ``version``: ``v<version>``, else its last release candidate (``v3.13.0-candidate-1``)."""
    tags = _git(source, "tag", "--list", f"v{version}", f"v{version}-candidate-*").split()
    if f"v{version}" in tags:
        return f"v{version}"
    candidates = sorted(tags, key=lambda tag: int(tag.rsplit("-", 1)[1]))
    if not candidates:
        raise RuntimeError(f"{source} has no tag v{version} (nor a release candidate of it)")
    return candidates[-1]


def prepare(source: Path | None, ref: str | None, work: Path) -> tuple[str, Path]:
    """The suite's ``tests/`` directory at ``ref`` (default: the installed client's tag), unpacked under ``work``."""
    if source is None:
        source = work / "pulsar-client-python.git"
        if not source.exists():
            subprocess.run(["git", "clone", "--bare", REPOSITORY, str(source)], check=True)
    ref = ref or release_ref(source, client_version())
    suite = work / f"pulsar-client-python-{ref}"
    if not (suite / "tests").exists():
        archive = subprocess.run(
            ["git", "-C", str(source), "archive", "--format=tar", ref, "tests"], capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(suite, filter="data")
    return ref, suite / "tests"


# -- inside the network namespace -------------------------------------------------------------------------------


def _tokens(data: Path, tests: Path) -> tuple[Path, str]:
    """A fresh HMAC secret key; the suite's token (``tests/.test-token.txt``) and a super-user's token for set-up."""
    import jwt

    data.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_bytes(32)
    key = data / "secret.key"
    key.write_bytes(secret)
    (tests / ".test-token.txt").write_text(jwt.encode({"sub": TOKEN_SUBJECT}, secret, algorithm="HS256"))
    return key, jwt.encode({"sub": "superUser"}, secret, algorithm="HS256")


def _endpoint(tests: Path, data: Path, key: Path) -> Any:
    from tests.server_process import ServerProcess

    conf = tests / "test-conf"
    server = ServerProcess(
        data / "endpoint",
        "--host", "0.0.0.0", "--admin-port", "8080", "--advertised-address", "localhost",
        "--tls-port", "6651", "--admin-tls-port", "8443",
        "--tls-cert-file", str(conf / "broker-cert.pem"),
        "--tls-key-file", str(conf / "broker-key.pem"),
        "--tls-trust-certs-file", str(conf / "cacert.pem"),
        "--authentication-enabled", "--authentication-providers", "tls,token,basic",
        "--token-secret-key", f"file://{key}",
        "--basic-auth-conf", str(conf / ".htpasswd"),
        "--authorization-enabled", "--super-user-roles", "localhost,superUser,admin",
        "--anonymous-user-role", "anonymous",
        "--max-message-size", "1024000",
        # Not in the suite's broker configuration, so at Pulsar's default (this endpoint's default is 0).
        "--active-consumer-failover-delay-time-millis", "1000",
        port=6650,
    )  # fmt: skip
    return server


def pulsar_conf(conf: Path, key: Path) -> dict[str, object]:
    """``tests/test-conf/standalone-ssl.conf``'s settings over tests/conformance/pulsar_standalone.py's defaults (its
    BookKeeper, ZooKeeper and load-balancer tuning left out; the broker's own client set up as that file leaves it,
    without credentials)."""
    providers = ("Tls", "Token", "Basic")
    return {
        "brokerServicePortTls": 6651, "webServicePortTls": 8443, "bindAddress": "0.0.0.0",
        "advertisedAddress": "localhost",
        "backlogQuotaCheckEnabled": "true", "backlogQuotaCheckIntervalInSeconds": 60,
        "brokerDeleteInactiveTopicsEnabled": "true", "brokerDeleteInactiveTopicsFrequencySeconds": 60,
        "messageExpiryCheckIntervalInMinutes": 5, "clientLibraryVersionCheckEnabled": "false",
        "maxUnackedMessagesPerConsumer": 50000, "subscriptionRedeliveryTrackerEnabled": "true",
        "tlsCertificateFilePath": conf / "broker-cert.pem", "tlsKeyFilePath": conf / "broker-key.pem",
        "tlsTrustCertsFilePath": conf / "cacert.pem", "tlsAllowInsecureConnection": "false",
        "anonymousUserRole": "anonymous", "authenticationEnabled": "true",
        "authenticationProviders": ",".join(
            f"org.apache.pulsar.broker.authentication.AuthenticationProvider{kind}" for kind in providers
        ),
        "authorizationEnabled": "true", "tokenSecretKey": f"file://{key}",
        "basicAuthConf": conf / ".htpasswd",
        "superUserRoles": "localhost,superUser,admin",
        "acknowledgmentAtBatchIndexLevelEnabled": "true",
        "managedLedgerMaxEntriesPerLedger": 50000, "managedLedgerMinLedgerRolloverTimeMinutes": 10,
        "defaultRetentionTimeInMinutes": 0, "defaultRetentionSizeInMB": 0, "keepAliveIntervalSeconds": 30,
        "allowAutoTopicCreation": "true", "allowAutoTopicCreationType": "non-partitioned", "defaultNumPartitions": 1,
        "maxMessageSize": 1024000,
        "subscriptionKeySharedUseConsistentHashing": "false",
        "topicLevelPoliciesEnabled": "false",
        # Not in the suite's file, so at Pulsar's default (pulsar_standalone.py turns the coordinator on).
        "transactionCoordinatorEnabled": "false",
    }  # fmt: skip


def _pulsar(tests: Path, data: Path, key: Path, admin_token: str) -> Any:
    from tests.conformance.pulsar_standalone import PulsarStandalone

    class CIStandalone(PulsarStandalone):
        def command(self) -> list[str]:
            """Advertised as ``localhost``, the name the suite's certificates carry."""
            command = super().command()
            command[command.index("--advertised-address") + 1] = "localhost"
            return command

        def _ready(self) -> bool:
            """As the suite's CI: the web service answers ``/metrics`` (no coordinator to wait for, and no
            ``public/default``: with this configuration the standalone's own admin client, which has no
            credentials, is refused creating the cluster, ``public`` and ``public/default``; the set-up makes them)."""
            try:
                with urllib.request.urlopen(f"{self.admin_url}/metrics", timeout=2) as response:
                    return response.status == 200
            except OSError:
                return False

    pulsar = CIStandalone(
        data / "pulsar",
        extra_conf=pulsar_conf(tests / "test-conf", key),
        admin_headers={"Authorization": f"Bearer {admin_token}"},
    )
    pulsar.broker_port, pulsar.web_port = 6650, 8080
    return pulsar


def _configure(admin_token: str, log: TextIO) -> None:
    """The suite's start-test-service-inside-container.sh, through the admin API as the super-user ``superUser``: it
    creates the cluster ``standalone``, tenant ``public`` administered by ``anonymous``, ``public/default`` and
    ``public/default-2`` where ``anonymous`` may produce and consume, tenant ``private`` and ``private/auth`` for
    ``token-principal``. On Pulsar with this configuration none of them exists yet (see ``_pulsar``); this endpoint
    has the cluster, ``public`` and ``public/default`` from its start, as a Pulsar standalone that could create them
    has, so where a ``PUT`` answers 409 the same state is set by updating (the tenant's ``POST``, the namespace's
    permissions). Every answer goes to the log; as in the CI script (``curl`` without ``--fail``) none stops it."""

    def call(method: str, path: str, body: object) -> int:
        request = urllib.request.Request(
            f"http://localhost:8080/admin/v2/{path}", data=json.dumps(body).encode(), method=method,
            headers={"Authorization": f"Bearer {admin_token}", "Content-Type": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, text = response.status, response.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read().decode(errors="replace")
        log.write(f"set-up: {method} {path}: {status} {text}\n")
        return status

    call("PUT", "clusters/standalone", {
        "serviceUrl": "http://localhost:8080/", "serviceUrlTls": "https://localhost:8443/",
        "brokerServiceUrl": "pulsar://localhost:6650/", "brokerServiceUrlTls": "pulsar+ssl://localhost:6651/",
    })  # fmt: skip
    for tenant, admins in (("public", ["anonymous"]), ("private", [])):
        body = {"adminRoles": admins, "allowedClusters": ["standalone"]}
        if call("PUT", f"tenants/{tenant}", body) == 409:
            call("POST", f"tenants/{tenant}", body)
    for namespace, role in (("public/default", "anonymous"), ("public/default-2", "anonymous"),
                            ("private/auth", TOKEN_SUBJECT)):  # fmt: skip
        policies = {"auth_policies": {"namespace_auth": {role: ["produce", "consume"]}},
                    "replication_clusters": ["standalone"]}  # fmt: skip
        if call("PUT", f"namespaces/{namespace}", policies) == 409:
            call("POST", f"namespaces/{namespace}/permissions/{role}", ["produce", "consume"])


def tests_of(tests: Path, file: str) -> list[str]:
    """The test ids (``module.Class.test``) of one of the suite's files, in unittest's order."""
    code = (
        "import sys, unittest\n"
        "def walk(suite):\n"
        "    for item in suite:\n"
        "        yield from walk(item) if isinstance(item, unittest.TestSuite) else [item]\n"
        f"for test in walk(unittest.defaultTestLoader.loadTestsFromName({Path(file).stem!r})):\n"
        "    print(test.id())\n"
    )
    listed = subprocess.run([sys.executable, "-c", code], cwd=tests, capture_output=True, text=True, check=True)
    return [line for line in listed.stdout.splitlines() if line]


def _default_sigint() -> None:
    """SIGINT at its default in the test's process, as in a terminal or CI job: a driver started in the background
    inherits it ignored, and Python then leaves KeyboardInterrupt out (interrupted_test.py raises SIGINT)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_test(tests: Path, test: str, log: TextIO) -> str:
    """Run one test in a process of its own; PASS, FAIL or SKIP from unittest's verdict."""
    log.write(f"==== {test}\n")
    log.flush()
    began = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "unittest", "-v", test], cwd=tests, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", check=False, timeout=TEST_KILL_SECONDS,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=_default_sigint,
        )  # fmt: skip
        output, code = done.stdout, done.returncode
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        output, code = output + f"\n(killed after {TEST_KILL_SECONDS} s)\n", -9
    log.write(output)
    log.write(f"==== {test}: exit {code} in {time.monotonic() - began:.1f} s\n")
    return outcome(output)


def outcome(output: str) -> str:
    """PASS, SKIP or FAIL from unittest's verdict, the line after "Ran 1 test in ...", wherever the client's log lines
    fall: the C++ client sometimes aborts while the interpreter exits after a test passed ("terminate called without
    an active exception", exit -6); the test's own outcome is what is counted, and the abort stays in the log. No
    verdict (the process killed or crashed during the test) is a FAIL."""
    lines = output.splitlines()
    ran = max((i for i, line in enumerate(lines) if line.startswith("Ran 1 test")), default=None)
    verdict = next((line for line in lines[ran + 1 :] if line.strip()), "") if ran is not None else ""
    if verdict.startswith("OK"):
        return "SKIP" if "skipped=" in verdict else "PASS"
    return "FAIL"


def result_name(test: str) -> str:
    module, cls, name = test.split(".")
    return f"{module}.py::{cls}::{name}"


def run_inside(target: str, suite_tests: Path, work: Path, results: Path) -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    # test_connect_timeout dials 192.0.2.1 (TEST-NET-1) and expects the connection attempt to time out, as on the
    # CI's network; in a namespace with only loopback it fails at once ("network unreachable"). A tun device nobody
    # reads takes that network's packets and drops them.
    subprocess.run(["ip", "tuntap", "add", "dev", "blackhole0", "mode", "tun"], check=True)
    subprocess.run(["ip", "link", "set", "blackhole0", "up"], check=True)
    subprocess.run(["ip", "route", "add", "192.0.2.0/24", "dev", "blackhole0"], check=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(f"[{target}] terminated"))  # stops the broker on the way out
    data = work / f"data-{target}-{int(time.time())}"
    key, admin_token = _tokens(data, suite_tests)
    if target == "endpoint":
        broker, start_timeout = _endpoint(suite_tests, data, key), 60
    else:
        broker, start_timeout = _pulsar(suite_tests, data, key, admin_token), 600
    lines: list[str] = []
    try:
        broker.start(timeout=start_timeout)
        with (results / f"{target}.log").open("w") as log:
            _configure(admin_token, log)
            for file in FILES:
                began = time.monotonic()
                found = [(run_test(suite_tests, test, log), test) for test in tests_of(suite_tests, file)]
                lines += [f"{status} {result_name(test)}" for status, test in found]
                summary = {s: sum(1 for f in found if f[0] == s) for s in ("PASS", "FAIL", "SKIP")}
                print(f"[{target}] {file}: {summary} in {time.monotonic() - began:.0f} s", flush=True)
    finally:
        broker.stop()
    (results / f"{target}.txt").write_text("".join(f"{line}\n" for line in lines))


# -- outside ----------------------------------------------------------------------------------------------------


def compare(results: Path) -> None:
    def read(target: str) -> dict[str, str]:
        path = results / f"{target}.txt"
        if not path.exists():
            return {}
        return {line.split()[1]: line.split()[0] for line in path.read_text().splitlines() if line}

    endpoint, pulsar = read("endpoint"), read("pulsar")
    rows = ["| file | broker | passed | failed | skipped |", "|---|---|---|---|---|"]
    for name, got in (("endpoint", endpoint), ("pulsar", pulsar)):
        if got:
            counts = {s: sum(1 for v in got.values() if v == s) for s in ("PASS", "FAIL", "SKIP")}
            print(f"{name}: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
            for file in (*FILES, None):
                chosen = [v for t, v in got.items() if file is None or t.startswith(f"{file}::")]
                cells = " | ".join(str(chosen.count(s)) for s in ("PASS", "FAIL", "SKIP"))
                rows.append(f"| {file or '**all**'} | {name} | {cells} |")
    (results / "summary.md").write_text("\n".join(rows) + "\n")
    if endpoint and pulsar:
        report_pass_on_pulsar_not_here(endpoint, pulsar, results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=("endpoint", "pulsar", "both"), default="both")
    parser.add_argument("--source", type=Path, default=None, help="a pulsar-client-python git repository")
    parser.add_argument("--ref", default=None, help="its tag or commit (default: the installed client's tag)")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "python-suite", help="source and data")
    parser.add_argument("--results", type=Path, default=ROOT / "build" / "python-suite" / "results")
    parser.add_argument("--suite-tests", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.work = args.work.resolve()
    args.results = args.results.resolve()
    args.results.mkdir(parents=True, exist_ok=True)
    if args.inside:
        run_inside(args.target, args.suite_tests, args.work, args.results)
        return
    ref, suite_tests = prepare(args.source, args.ref, args.work)
    print(f"pulsar-client-python {ref}: {suite_tests}", flush=True)
    targets = ["endpoint", "pulsar"] if args.target == "both" else [args.target]
    if "pulsar" in targets:
        from tests.conformance.pulsar_standalone import build

        build()
    codes = []
    for target in targets:  # one broker at a time, each in a network namespace of its own (the suite's fixed ports)
        command = [
            "unshare", "-n", sys.executable, "-m", "tests.python_suite", "--inside", "--target", target,
            "--suite-tests", str(suite_tests), "--work", str(args.work), "--results", str(args.results),
        ]  # fmt: skip
        codes.append(subprocess.run(command, cwd=ROOT, check=False).returncode)
    compare(args.results)
    if any(codes):
        raise SystemExit(f"a target's run failed (exit codes {codes})")


if __name__ == "__main__":
    main()
