"""The official Go client's own test suite (``github.com/apache/pulsar-client-go``, packages ``pulsar/`` and
``pulsaradmin/``) against this endpoint and against Apache Pulsar 4.2.4, each configured as that suite's CI broker.

    python -m tests.go_suite [--target endpoint|pulsar|both] [--version v0.19.0] [--results DIR]

What the suite expects of its broker (its ``integration-tests/conf/standalone.conf`` and
``scripts/pulsar-test-service-start.sh``): ports 6650, 6651 (TLS), 8080 and 8443 (https) on ``localhost``; the
certificates of ``integration-tests/certs``; TLS, token (``integration-tests/tokens/secret.key``) and basic
(``integration-tests/conf/.htpasswd``) authentication, authorization with super-users ``localhost``, ``superUser`` and
``admin``, anonymous clients as role ``anonymous``; transactions on; 1 MiB messages. Then the tenant ``public`` is
administered by ``anonymous``, which may produce and consume in ``public/default``; tenant ``private`` has a namespace
``private/auth`` where ``token-principal`` may produce and consume.

The module source comes through the Go module proxy (``go mod download``; the version defaults to the one in
tests/go/go.mod); the test binaries are compiled outside, then each target runs in a network namespace of its own
(``unshare -n``, root needed) so that the fixed ports clash with nothing else on the machine and the two targets
run side by side. Each top-level test runs in a process of its own (``-test.run '^Name$'``): a test that panics ends
only its own run, where ``go test`` would stop its whole package there. Each target writes ``<results>/<target>.txt``:
one ``PASS|FAIL|SKIP <package> <Test>`` line per top-level test, and ``<target>.log`` with the full output; the
comparison (``pass-on-pulsar-not-here.txt``) lists the tests that pass on Pulsar and fail (or do not run) here.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent
MODULE = "github.com/apache/pulsar-client-go"
PACKAGES = ("./pulsar/...", "./pulsaradmin/...")
#: How long one test may run (the suite's CI gives ``go test`` 20 minutes for everything), and when its process is
#: killed if the test binary's own timeout did not end it.
TEST_TIMEOUT = "5m"
TEST_KILL_SECONDS = 330
_RESULT = re.compile(r"^--- (PASS|FAIL|SKIP): (\S+) ")


def module_version() -> str:
    for line in (ROOT / "tests" / "go" / "go.mod").read_text().splitlines():
        if line.strip().startswith(f"require {MODULE} "):
            return line.split()[-1]
    raise RuntimeError(f"tests/go/go.mod does not require {MODULE}")


def prepare(version: str, work: Path) -> tuple[Path, list[tuple[str, Path, Path]]]:
    """The suite's source (a writable copy) and its compiled test binaries: (package, binary, package dir)."""
    info = json.loads(
        subprocess.run(
            ["go", "mod", "download", "-json", f"{MODULE}@{version}"], capture_output=True, text=True, check=True
        ).stdout
    )
    src = work / f"pulsar-client-go-{version}"
    if not src.exists():
        shutil.copytree(info["Dir"], src)
        for path in [src, *src.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
    listing = subprocess.run(
        ["go", "list", "-f", "{{.ImportPath}} {{.Dir}} {{len .TestGoFiles}} {{len .XTestGoFiles}}", *PACKAGES],
        cwd=src, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    binaries = []
    for line in listing.splitlines():
        package, directory, tests, xtests = line.split()
        if int(tests) + int(xtests) == 0:
            continue
        binary = work / "bin" / (package.removeprefix(MODULE + "/").replace("/", "_") + ".test")
        binary.parent.mkdir(parents=True, exist_ok=True)
        if not binary.exists():
            print(f"compiling {package}", flush=True)
            subprocess.run(["go", "test", "-c", "-o", str(binary), package], cwd=src, check=True)
        binaries.append((package.removeprefix(MODULE + "/"), binary, Path(directory)))
    (work / f"binaries-{version}.json").write_text(
        json.dumps([[package, str(binary), str(directory)] for package, binary, directory in binaries])
    )
    return src, binaries


def prepared(version: str, work: Path) -> tuple[Path, list[tuple[str, Path, Path]]]:
    """What :func:`prepare` made (inside the network namespace, where the module proxy is out of reach)."""
    listed = json.loads((work / f"binaries-{version}.json").read_text())
    return work / f"pulsar-client-go-{version}", [(p, Path(b), Path(d)) for p, b, d in listed]


# -- inside the network namespace -------------------------------------------------------------------------------


def _endpoint(src: Path, data: Path, source: Path | None = None) -> tuple[object, object]:
    from tests.server_process import ServerProcess

    it = src / "integration-tests"
    server = ServerProcess(
        data / "endpoint",
        "--host", "0.0.0.0", "--admin-port", "8080", "--advertised-address", "localhost",
        "--tls-port", "6651", "--admin-tls-port", "8443",
        "--tls-cert-file", str(it / "certs" / "broker-cert.pem"),
        "--tls-key-file", str(it / "certs" / "broker-key.pem"),
        "--tls-trust-certs-file", str(it / "certs" / "cacert.pem"),
        "--authentication-enabled", "--authentication-providers", "tls,token,basic",
        "--token-secret-key", f"file://{it / 'tokens' / 'secret.key'}",
        "--basic-auth-conf", str(it / "conf" / ".htpasswd"),
        "--authorization-enabled", "--super-user-roles", "localhost,superUser,admin",
        "--anonymous-user-role", "anonymous",
        "--max-message-size", "1048576",
        # Pulsar's default, so the suite's CI broker's (this endpoint's default is 0).
        "--active-consumer-failover-delay-time-millis", "1000",
        port=6650,
    )  # fmt: skip
    if source is not None:  # the server of another checkout (a branch to compare), first on its sys.path
        code = f"import runpy, sys; sys.path.insert(0, {str(source)!r}); runpy.run_module('proxy', run_name='__main__')"
        server.launcher = [sys.executable, "-c", code]
    return server.start(timeout=60), server.stop


def _pulsar(src: Path, data: Path) -> tuple[object, object]:
    from tests.conformance.pulsar_standalone import PulsarStandalone

    class CIStandalone(PulsarStandalone):
        def command(self) -> list[str]:
            """Advertised as ``localhost``, the name the suite's certificates carry (no IP address in them)."""
            command = super().command()
            command[command.index("--advertised-address") + 1] = "localhost"
            return command

        def _coordinator_ready(self) -> bool:
            return True  # anonymous may not look the coordinators up here; the suite's CI waits for the web port

    it = src / "integration-tests"
    certs = it / "certs"
    token = (it / "tokens" / "admin-token").read_text().strip()
    conf = {
        "brokerServicePortTls": 6651, "webServicePortTls": 8443, "bindAddress": "0.0.0.0",
        "advertisedAddress": "localhost",
        "tlsCertificateFilePath": certs / "broker-cert.pem", "tlsKeyFilePath": certs / "broker-key.pem",
        "tlsTrustCertsFilePath": certs / "cacert.pem", "tlsAllowInsecureConnection": "false",
        "anonymousUserRole": "anonymous", "authenticationEnabled": "true",
        "authenticationProviders": ",".join(
            f"org.apache.pulsar.broker.authentication.AuthenticationProvider{kind}"
            for kind in ("Tls", "Token", "Basic")
        ),
        "authorizationEnabled": "true", "superUserRoles": "localhost,superUser,admin",
        "brokerClientTlsEnabled": "true", "brokerClientTrustCertsFilePath": certs / "cacert.pem",
        "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationTls",
        "brokerClientAuthenticationParameters": json.dumps(
            {"tlsCertFile": str(certs / "client-cert.pem"), "tlsKeyFile": str(certs / "client-key.pem")}
        ),
        "tokenSecretKey": f"file://{it / 'tokens' / 'secret.key'}",
        "basicAuthConf": it / "conf" / ".htpasswd",
        "maxMessageSize": 1048576, "maxUnackedMessagesPerConsumer": 50000,
        "brokerDeleteInactiveTopicsEnabled": "true", "brokerDeleteInactiveTopicsFrequencySeconds": 60,
        "systemTopicSchemaCompatibilityStrategy": "ALWAYS_COMPATIBLE",
    }  # fmt: skip
    pulsar = CIStandalone(data / "pulsar", extra_conf=conf, admin_headers={"Authorization": f"Bearer {token}"})
    pulsar.broker_port, pulsar.web_port = 6650, 8080
    return pulsar.start(timeout=600), pulsar.stop


def _configure(src: Path) -> None:
    """The suite's scripts/pulsar-test-service-start.sh, through the admin API as the super-user ``admin``."""
    token = (src / "integration-tests" / "tokens" / "admin-token").read_text().strip()

    def call(method: str, path: str, body: object) -> None:
        request = urllib.request.Request(
            f"http://localhost:8080{path}", data=json.dumps(body).encode(), method=method,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=30):
            pass

    call("POST", "/admin/v2/tenants/public", {"adminRoles": ["anonymous"], "allowedClusters": ["standalone"]})
    call("POST", "/admin/v2/namespaces/public/default/permissions/anonymous", ["produce", "consume"])
    call("PUT", "/admin/v2/tenants/private", {"adminRoles": [], "allowedClusters": ["standalone"]})
    call("PUT", "/admin/v2/namespaces/private/auth", {})
    call("POST", "/admin/v2/namespaces/private/auth/permissions/token-principal", ["produce", "consume"])


def _tests_of(binary: Path, directory: Path) -> list[str]:
    listed = subprocess.run(
        [str(binary), "-test.list", ".*"], cwd=directory, capture_output=True, text=True, check=True
    ).stdout
    return [line for line in listed.splitlines() if line.startswith(("Test", "Example"))]


def _run_test(binary: Path, directory: Path, test: str, log: TextIO) -> tuple[str, str]:
    """Run one top-level test in a process of its own (a panic in one test ends its process only, where a whole
    package's run would stop at it); (status, name), FAIL when it ended without a result line."""
    log.write(f"==== {binary.name} {test}\n")
    log.flush()
    try:
        output = subprocess.run(
            [str(binary), "-test.v", "-test.run", f"^{test}$", "-test.timeout", TEST_TIMEOUT], cwd=directory,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", check=False,
            timeout=TEST_KILL_SECONDS,
        ).stdout  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        output += f"\n(killed after {TEST_KILL_SECONDS} s)\n"
    log.write(output)
    for line in output.splitlines():
        match = _RESULT.match(line)
        if match and match.group(2) == test:
            return match.group(1), test
    return "FAIL", test


def run_inside(target: str, version: str, work: Path, results: Path, source: Path | None) -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    src, binaries = prepared(version, work)
    data = work / f"data-{target}-{int(time.time())}"
    broker, stop = _endpoint(src, data, source) if target == "endpoint" else _pulsar(src, data)
    lines: list[str] = []
    try:
        _configure(src)
        with (results / f"{target}.log").open("w") as log:
            for package, binary, directory in binaries:
                print(f"[{target}] running {package}", flush=True)
                began = time.monotonic()
                found = [_run_test(binary, directory, test, log) for test in _tests_of(binary, directory)]
                lines += [f"{status} {package} {test}" for status, test in found]
                summary = {s: sum(1 for f in found if f[0] == s) for s in ("PASS", "FAIL", "SKIP")}
                print(f"[{target}] {package}: {summary} in {time.monotonic() - began:.0f} s", flush=True)
    finally:
        stop()  # type: ignore[operator]
        del broker
    (results / f"{target}.txt").write_text("".join(f"{line}\n" for line in lines))


# -- outside ----------------------------------------------------------------------------------------------------


def compare(results: Path) -> None:
    def read(target: str) -> dict[str, str]:
        path = results / f"{target}.txt"
        if not path.exists():
            return {}
        return {" ".join(line.split()[1:]): line.split()[0] for line in path.read_text().splitlines() if line}

    endpoint, pulsar = read("endpoint"), read("pulsar")
    for name, got in (("endpoint", endpoint), ("pulsar", pulsar)):
        if got:
            counts = {s: sum(1 for v in got.values() if v == s) for s in ("PASS", "FAIL", "SKIP")}
            print(f"{name}: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
    if endpoint and pulsar:
        report_pass_on_pulsar_not_here(endpoint, pulsar, results)


def report_pass_on_pulsar_not_here(endpoint: dict[str, str], pulsar: dict[str, str], results: Path) -> None:
    """Print and write (``pass-on-pulsar-not-here.txt``) the tests that pass on Pulsar and not on the endpoint."""
    passing = [test for test, status in pulsar.items() if status == "PASS"]
    missing = sorted(test for test in passing if endpoint.get(test) != "PASS")
    print(f"of the {len(passing)} tests that pass on Pulsar, {len(passing) - len(missing)} pass here")
    listing = "".join(f"{test} {endpoint.get(test, 'NOT RUN')}\n" for test in missing)
    (results / "pass-on-pulsar-not-here.txt").write_text(listing)
    for test in missing:
        print(f"  {endpoint.get(test, 'NOT RUN'):8} {test}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=("endpoint", "pulsar", "both"), default="both")
    parser.add_argument("--version", default=None, help="pulsar-client-go version (default: tests/go/go.mod's)")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "go-suite", help="source, binaries, data")
    parser.add_argument("--results", type=Path, default=ROOT / "build" / "go-suite" / "results")
    parser.add_argument(
        "--endpoint-source", type=Path, default=None, help="run the endpoint of this checkout (default: this one)"
    )
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    version = args.version or module_version()
    args.results.mkdir(parents=True, exist_ok=True)
    if args.inside:
        run_inside(args.target, version, args.work, args.results, args.endpoint_source)
        return
    prepare(version, args.work)
    targets = ["endpoint", "pulsar"] if args.target == "both" else [args.target]
    if "pulsar" in targets:
        from tests.conformance.pulsar_standalone import build

        build()
    # Each target in a network namespace of its own: the suite's fixed ports clash with nothing, and both run at once.
    runs = []
    for target in targets:
        command = ["unshare", "-n", sys.executable, "-m", "tests.go_suite", "--inside", "--target", target,
                   "--version", version, "--work", str(args.work), "--results", str(args.results)]  # fmt: skip
        if args.endpoint_source:
            command += ["--endpoint-source", str(args.endpoint_source.resolve())]
        runs.append(subprocess.Popen(command, cwd=ROOT))
    codes = [run.wait() for run in runs]
    compare(args.results)
    if any(codes):
        raise SystemExit(f"a target's run failed (exit codes {codes})")


if __name__ == "__main__":
    main()
