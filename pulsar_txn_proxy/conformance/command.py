"""``pulsar-txn-proxy conformance list|run|record``: the conformance suite pointed at any Pulsar-compatible broker.

Exit status of ``run``: 0 when no scenario ``differs`` or ends in ``error``, 1 otherwise, 2 for bad usage (unknown
client, a pattern that selects nothing, a broker that cannot be reached).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

USAGE_ERROR = 2
_NEEDS_CLIENT = (
    "the conformance suite drives the official Python client: pip install 'pulsar-txn-proxy[conformance]' "
    "(pulsar-client {error})"
)


def add_subcommand(commands: Any) -> None:
    """Add ``conformance`` and its own subcommands to the CLI's subparsers."""
    parser = commands.add_parser(
        "conformance",
        help="run the conformance suite against a Pulsar-compatible broker",
        description="Scenarios observed through the official Pulsar clients (Python; Java and Go harnesses built "
        "on first use) and compared with what Apache Pulsar 4.2.4 does.",
    )
    actions = parser.add_subparsers(dest="conformance_command", required=True)
    listing = actions.add_parser("list", help="the scenario catalogue")
    listing.add_argument("--json", action="store_true", help="as a JSON list of objects")
    _selection(listing)

    run = actions.add_parser("run", help="run the scenarios against a broker and compare with Pulsar")
    _target(run)
    _selection(run)
    run.add_argument("--report", metavar="DIR", help="write report.json, junit.xml and report.html to DIR")
    run.add_argument(
        "--restart-command",
        metavar="CMD",
        help="shell command that kills and starts the broker again on its data (restart scenarios "
        "are not run without it)",
    )
    reference = run.add_mutually_exclusive_group()
    reference.add_argument("--golden", metavar="DIR", help="compare with goldens recorded by `conformance record`")
    reference.add_argument(
        "--reference-url",
        metavar="URL",
        help="compare with a live reference broker (pulsar://host:port) instead of goldens",
    )
    run.add_argument("--reference-admin-url", metavar="URL", help="the reference broker's admin URL")
    run.add_argument(
        "--known-differences",
        choices=("auto", "excuse", "compare"),
        default="auto",
        help="this endpoint's documented deliberate differences from Pulsar: excused only for this endpoint "
        "(auto, the default: when the broker's CONNECTED names it pulsar-txn-proxy), or always/never",
    )

    record = actions.add_parser("record", help="record goldens from a reference broker")
    _target(record)
    _selection(record)
    record.add_argument("--out", metavar="DIR", required=True, help="directory of the golden files to write")
    record.add_argument("--restart-command", metavar="CMD", help="as for run")


def _target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--service-url", required=True, metavar="URL", help="the broker (pulsar://host:port or pulsar+ssl://host:port)"
    )
    parser.add_argument(
        "--admin-url",
        metavar="URL",
        help="its admin REST API (http://host:port or https://...); scenarios needing it are unsupported without",
    )
    secure = parser.add_argument_group(
        "TLS and authentication",
        "used by every client, raw connection and admin call of the run (named as pulsar-client, pulsar-admin and "
        "the official Python client name them)",
    )
    secure.add_argument(
        "--auth-plugin",
        metavar="NAME",
        default="",
        help="authentication plugin, e.g. org.apache.pulsar.client.impl.auth.AuthenticationToken (or token, basic, "
        "tls, AuthenticationBasic, AuthenticationTls)",
    )
    secure.add_argument(
        "--auth-params",
        metavar="PARAMS",
        default="",
        help="its parameters: token:<jwt> or file:///path for tokens, "
        '\'{"userId":"u","password":"p"}\' for basic, tlsCertFile:<path>,tlsKeyFile:<path> for tls',
    )
    secure.add_argument(
        "--token",
        metavar="JWT",
        help="shortcut for --auth-plugin org.apache.pulsar.client.impl.auth.AuthenticationToken --auth-params "
        "token:JWT (pulsarctl's name)",
    )
    secure.add_argument(
        "--tls-trust-certs-file-path",
        "--tls-trust-cert-path",
        dest="tls_trust_certs_file_path",
        metavar="PEM",
        default="",
        help="CA certificates to trust for pulsar+ssl:// and https:// (pulsar-admin: --tls-trust-cert-path)",
    )
    secure.add_argument(
        "--tls-allow-insecure-connection",
        "--tls-allow-insecure",
        dest="tls_allow_insecure_connection",
        action="store_true",
        help="accept any broker certificate (pulsar-admin: --tls-allow-insecure)",
    )
    secure.add_argument(
        "--tls-validate-hostname",
        "--tls-enable-hostname-verification",
        dest="tls_validate_hostname",
        action="store_true",
        help="check that the certificate names the broker's host (pulsar-admin: --tls-enable-hostname-verification)",
    )


def credentials_of(args: argparse.Namespace) -> Any:
    """The run's :class:`~pulsar_txn_proxy.conformance.security.Credentials`; ValueError on contradicting options."""
    from pulsar_txn_proxy.conformance import security

    plugin, params = args.auth_plugin, args.auth_params
    if args.token:
        if plugin:
            raise ValueError("give either --token or --auth-plugin, not both")
        plugin, params = security.TOKEN_PLUGIN, f"token:{args.token}"
    elif params and not plugin:
        raise ValueError("--auth-params needs --auth-plugin")
    credentials = security.Credentials(
        plugin, params, args.tls_trust_certs_file_path, args.tls_allow_insecure_connection, args.tls_validate_hostname
    )
    if credentials.tls_trust_certs_file_path and not Path(credentials.tls_trust_certs_file_path).is_file():
        raise ValueError(f"--tls-trust-certs-file-path {credentials.tls_trust_certs_file_path}: no such file")
    if credentials.method not in ("", "other"):
        credentials.connect_fields()  # the plugin's parameters are readable (a token file, a basic user)
    return credentials


def _selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--clients",
        default="python,java,go",
        help="comma list of the clients to drive: python, java, go (default all three)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PATTERN",
        help="scenario ids to run: a glob (core.*, *txn*) or a prefix (transactions); repeatable",
    )
    parser.add_argument("--skip", action="append", default=[], metavar="PATTERN", help="scenario ids to leave out")


def run_command(args: argparse.Namespace) -> int:
    """Dispatch ``pulsar-txn-proxy conformance ...``."""
    try:
        import pulsar  # noqa: F401 - the scenarios' client: fail here with how to get it
    except ImportError as exc:
        print(f"pulsar-txn-proxy conformance: {_NEEDS_CLIENT.format(error=exc)}", file=sys.stderr)
        return USAGE_ERROR
    from pulsar_txn_proxy.conformance import catalogue

    clients = {c.strip() for c in args.clients.split(",") if c.strip()}
    if not clients or clients - set(catalogue.CLIENTS):
        print(
            f"pulsar-txn-proxy conformance: --clients takes {', '.join(catalogue.CLIENTS)}; got {args.clients!r}",
            file=sys.stderr,
        )
        return USAGE_ERROR
    entries = [e for e in catalogue.select(catalogue.load(), args.only, args.skip) if set(e.clients) <= clients]
    if not entries:
        print("pulsar-txn-proxy conformance: no scenario matches the selection", file=sys.stderr)
        return USAGE_ERROR
    if args.conformance_command == "list":
        return _list(entries, args.json)
    return _run(args, entries, clients)


def _list(entries: list[Any], as_json: bool) -> int:
    if as_json:
        print(json.dumps([e.as_json() for e in entries], indent=1))
        return 0
    width = max(len(e.id) for e in entries)
    for e in entries:
        needs = ",".join(e.needs) or "-"
        print(f"{e.id:<{width}}  {','.join(e.clients):<9}  {needs:<28}  {e.summary[:100]}")
    print(f"{len(entries)} scenarios")
    return 0


class Console:
    """Progress lines on the terminal (stderr), with the time since the run began."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def elapsed(self) -> str:
        return _duration(time.monotonic() - self.started)

    def say(self, text: str) -> None:
        print(f"[{self.elapsed():>6}] {text}", file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    minutes, rest = divmod(int(seconds + 0.5), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{seconds:.1f}s"


def _run(args: argparse.Namespace, entries: list[Any], clients: set[str]) -> int:
    from pulsar_txn_proxy.conformance import framework, harness, report, runner, security
    from pulsar_txn_proxy.conformance.framework import Target

    try:
        credentials = credentials_of(args)
    except (ValueError, security.CredentialsError) as exc:
        print(f"pulsar-txn-proxy conformance: {exc}", file=sys.stderr)
        return USAGE_ERROR
    security.register(credentials, args.service_url, args.admin_url)
    console = Console()
    harness.progress = console.say
    logs = Path(args.report) if getattr(args, "report", None) else harness.cache_dir()
    logs.mkdir(parents=True, exist_ok=True)
    framework.log_clients_to(logs / "python-client.log")
    for url in (args.service_url, getattr(args, "reference_url", None)):
        if url and (problem := runner.reachable(url)) is not None:
            print(f"pulsar-txn-proxy conformance: {problem}", file=sys.stderr)
            return USAGE_ERROR
    restart = runner.restarter(args.restart_command, args.service_url, args.admin_url) if args.restart_command else None
    target = Target(args.service_url, args.service_url, args.admin_url, restart)
    recording = args.conformance_command == "record"

    if recording:
        reference = runner.Reference("none (recording)", "")
    elif getattr(args, "reference_url", None):
        reference = runner.Reference(
            f"live broker {args.reference_url}",
            "live",
            target=Target(args.reference_url, args.reference_url, args.reference_admin_url),
        )
    elif getattr(args, "golden", None):
        golden_dir = Path(args.golden)
        if not golden_dir.is_dir():
            print(f"pulsar-txn-proxy conformance: --golden {golden_dir} is not a directory", file=sys.stderr)
            return USAGE_ERROR
        golden, version = runner.load_golden_dir(golden_dir)
        reference = runner.Reference(f"goldens of {golden_dir}", version, golden)
    else:
        reference = runner.packaged_reference()

    console.say(f"probing {args.service_url} (admin: {args.admin_url or 'none'}; {credentials.describe()})")
    notes = runner.ensure_namespace(target)
    capabilities = runner.probe(target)
    for need, found in capabilities.items():
        console.say(f"  {need:<12} {'yes' if found.available else 'NO '}  {found.detail}")
    if reference.target is not None:
        notes += [f"reference: {note}" for note in runner.ensure_namespace(reference.target)]
        for need, found in runner.probe(reference.target).items():
            if not found.available and need != "restart":
                capabilities[need] = runner.Capability(False, f"the reference broker lacks it: {found.detail}")
    version = runner.server_version(target)
    mode = getattr(args, "known_differences", "auto")
    excuse_known = mode == "excuse" or (mode == "auto" and runner.is_this_endpoint(version))
    notes.append(
        f"the broker names itself {version or '(no answer)'!r} in CONNECTED: this endpoint's known deliberate "
        f"differences from Pulsar are {'excused' if excuse_known else 'compared like any other observation'}"
        f"{'' if mode == 'auto' else f' (--known-differences {mode})'}"
    )
    for note in notes:
        console.say(f"  note: {note}")
    harness.transactions = capabilities["transactions"].available
    runnable = [e for e in entries if runner.precheck(e, capabilities) is None]
    unavailable = runner.prepare_harnesses({c for e in runnable for c in e.clients})

    # Python-only scenarios first: the part that needs no toolchain, timed on its own.
    ordered = sorted(entries, key=lambda e: e.clients != ("python",))
    results = []
    part_started = time.monotonic()
    python_seconds = None
    for index, entry in enumerate(ordered, 1):
        if python_seconds is None and entry.clients != ("python",):
            python_seconds = time.monotonic() - part_started
        result = runner.run_entry(
            entry, target, reference, capabilities, unavailable, record=recording, excuse_known=excuse_known
        )
        results.append(result)
        console.say(
            f"{index:>3}/{len(ordered)} {entry.id} {result.outcome}"
            f"{f' ({result.seconds:.1f}s)' if result.seconds else ''}"
            f"{f': {result.reason}' if result.outcome not in ('pass', 'unsupported') else ''}"
        )
    if python_seconds is None:
        python_seconds = time.monotonic() - part_started
    total_seconds = time.monotonic() - console.started

    summary = report.Summary(
        target=target,
        reference=reference,
        capabilities=capabilities,
        notes=notes,
        results=results,
        seconds=total_seconds,
        python_seconds=python_seconds,
        client_versions=report.client_versions(clients),
    )
    if recording:
        written = report.write_goldens(Path(args.out), summary, runner.broker_version(target))
        print(report.table(summary))
        print(f"recorded {written} outcomes into {args.out} in {_duration(total_seconds)}")
        return 0 if all(r.outcome in ("pass", "unsupported", "not-run") for r in results) else 1
    if args.report:
        for path in report.write(Path(args.report), summary):
            console.say(f"wrote {path}")
    print(report.table(summary))
    failed = [r for r in results if r.outcome in ("differs", "error")]
    return 1 if failed else 0
