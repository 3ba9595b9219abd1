"""The ``pulsar-txn-proxy`` command."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any

from proxy.config import FIELDS, Settings, SettingsError, data_path, load
from proxy.data_lock import DataDirInUseError, lock_data_dir
from proxy.listen import ListenError, bind


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pulsar-txn-proxy", description="A Pulsar endpoint with transactions.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="run the server",
        description="Run the server. Precedence: options > PULSAR_TXN_PROXY_<OPTION> environment > --config file.",
    )
    serve.add_argument("--config", metavar="FILE", help="TOML file whose keys mirror these options")
    serve.add_argument("--host", help=f"address to listen on (default {Settings.host})")
    serve.add_argument("--port", type=int, help=f"Pulsar protocol port (default {Settings.port})")
    serve.add_argument("--admin-port", type=int, help=f"admin HTTP port (default {Settings.admin_port})")
    serve.add_argument("--data-dir", help=f"where the store lives (default {Settings.data_dir})")
    serve.add_argument("--advertised-address", help="host name lookups answer (default: the address reached)")
    serve.add_argument(
        "--listen-backlog",
        type=int,
        help=f"connections the kernel queues before they are accepted (default {Settings.listen_backlog})",
    )
    serve.add_argument(
        "--default-partitions",
        type=int,
        help="partitions of auto-created topics (default 0: non-partitioned)",
    )
    serve.add_argument(
        "--deduplication",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="drop messages re-sent with a known producer name and sequence id (default off)",
    )
    serve.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    serve.add_argument("--transaction-coordinators", type=int, help="transaction coordinators (default 16)")
    serve.add_argument(
        "--txn-snapshot-max-changes",
        type=int,
        help="transaction ends between buffer snapshots (default 1000)",
    )
    serve.add_argument("--txn-snapshot-interval-seconds", type=int, help="seconds between buffer snapshots (default 5)")
    serve.add_argument(
        "--txn-end-delay-ms",
        type=int,
        help="testing aid: pause between a transaction's COMMITTING/ABORTING record and its markers (default 0)",
    )
    serve.add_argument(
        "--policy-check-interval-seconds",
        type=int,
        help="seconds between applications of namespace message TTL and retention (default 60)",
    )
    serve.add_argument(
        "--keep-alive-interval-seconds",
        type=int,
        help="seconds between keep-alive checks; a peer silent for two is dropped (default 30)",
    )
    serve.add_argument(
        "--handshake-timeout-seconds", type=int, help="seconds a new connection may take to send CONNECT (default 10)"
    )
    serve.add_argument(
        "--frame-timeout-seconds",
        type=int,
        help="seconds a frame that has begun to arrive may take to arrive whole (default 30)",
    )
    serve.add_argument(
        "--managed-ledger-cache-size-mb",
        type=int,
        help="MiB of entries all topics keep in memory together for dispatch (default 128)",
    )
    serve.add_argument(
        "--managed-ledger-max-entries-per-ledger",
        type=int,
        help="entries after which a ledger rolls over; retention deletes whole closed ledgers (default 50000)",
    )
    serve.add_argument(
        "--managed-ledger-min-ledger-rollover-time-minutes",
        type=int,
        help="minutes a ledger stays open at least (default 10)",
    )
    serve.add_argument(
        "--managed-ledger-max-ledger-rollover-time-minutes",
        type=int,
        help="minutes after which a ledger that is not empty rolls over (default 240)",
    )
    serve.add_argument(
        "--default-retention-time-in-minutes",
        type=int,
        help="retention of topics without a policy: 0 keeps nothing acknowledged (Pulsar's default), -1 no limit",
    )
    serve.add_argument(
        "--default-retention-size-in-mb",
        type=int,
        help="retention size of topics without a policy: 0 (default) or -1 for no limit",
    )
    serve.add_argument(
        "--active-consumer-failover-delay-time-millis",
        type=int,
        help="Failover: ms from a change of active consumer to its notices and first messages (default 0; Pulsar 1000)",
    )
    serve.add_argument(
        "--max-message-size",
        type=int,
        help="largest message in bytes, advertised to clients, which batch and chunk by it (default 5242880)",
    )
    serve.add_argument(
        "--advertised-listeners",
        help="named addresses lookups ask for: name:pulsar://host:port[,name:pulsar+ssl://host:port,...]",
    )
    serve.add_argument(
        "--internal-listener-name", help="the listener lookups naming none get (default: the first advertised)"
    )
    _security_options(serve)
    serve.add_argument(
        "--authorization-enabled",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="check each role's permissions on the Pulsar protocol and the admin API (default off)",
    )
    serve.add_argument("--super-user-roles", help="comma list of the roles that may do anything")
    serve.add_argument(
        "--anonymous-user-role", help="role of a client without credentials while authentication is enabled"
    )
    demo = commands.add_parser(
        "demo",
        help="run the Spark pipeline example end to end",
        description="Start an endpoint on a temporary store (or use --service-url), publish sample JSON "
        "events to source-a1 and source-a2, aggregate them per key in event-time windows with PySpark and "
        "write the results to sink-b exactly once, then print them (needs the 'spark' or 'test' extra).",
    )
    demo.add_argument("--events", type=int, default=500, help="events per source topic (default 500)")
    demo.add_argument("--keep", metavar="DIR", help="keep the store and checkpoint in DIR")
    demo.add_argument("--service-url", help="use this endpoint (pulsar://host:port) instead of starting one")
    from pulsar_txn_proxy.conformance.command import add_subcommand

    add_subcommand(commands)
    return parser


def _security_options(serve: argparse.ArgumentParser) -> None:
    """TLS and authentication (issue 21), named after broker.conf's settings."""
    group = serve.add_argument_group("TLS and authentication")
    group.add_argument("--tls-port", type=int, help="Pulsar protocol over TLS, pulsar+ssl:// (default: none)")
    group.add_argument("--admin-tls-port", type=int, help="admin API over https (default: none)")
    group.add_argument("--tls-cert-file", help="PEM certificate (chain) of this server")
    group.add_argument("--tls-key-file", help="PEM private key of this server")
    group.add_argument("--tls-trust-certs-file", help="PEM CA certificates client certificates must chain to")
    group.add_argument(
        "--tls-require-trusted-client-cert",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="refuse TLS clients without a trusted certificate (default off)",
    )
    group.add_argument(
        "--authentication-enabled",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="authenticate every connection and admin request (default off)",
    )
    group.add_argument("--authentication-providers", help="comma list of token, basic, tls")
    group.add_argument("--token-secret-key", help="HMAC key of tokens: path, file://, data:;base64, or env:NAME")
    group.add_argument("--token-public-key", help="public key of tokens (RS/ES): path, file://, data: or env:NAME")
    group.add_argument("--token-public-alg", help="algorithm of --token-public-key (default RS256)")
    group.add_argument("--token-auth-claim", help="token claim naming the role (default sub)")
    group.add_argument("--basic-auth-conf", help="user:hash lines (crypt or $apr1$): path, file: or data: URL")
    group.add_argument(
        "--authentication-refresh-check-seconds",
        type=int,
        help="seconds between checks for expired credentials on a connection (default 60)",
    )
    group.add_argument(
        "--authenticate-metrics-endpoint",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="GET /metrics needs credentials too (default off)",
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    started = time.monotonic()
    args = _parser().parse_args(argv)
    if args.command == "demo":
        from spark.pipeline import run_demo

        return run_demo(args.events, args.keep, args.service_url)
    if args.command == "conformance":
        from pulsar_txn_proxy.conformance.command import run_command

        return run_command(args)
    cli = {k: v for k, v in vars(args).items() if k in FIELDS}
    try:
        settings = load(cli, args.config)
        authenticator, tls_options = _security(settings)
    except SettingsError as exc:
        print(f"pulsar-txn-proxy: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        lock = lock_data_dir(data_path(settings))
        pulsar_socket = bind(settings.host, settings.port, settings.listen_backlog)
        tls_socket = None
        if settings.tls_port is not None:
            tls_socket = bind(settings.host, settings.tls_port, settings.listen_backlog)
    except (DataDirInUseError, ListenError) as exc:
        print(f"pulsar-txn-proxy: {exc}", file=sys.stderr)
        return 1
    from proxy.run import serve

    try:
        return serve(
            settings,
            started,
            pulsar_socket,
            tls_socket=tls_socket,
            tls_options=tls_options,
            authenticator=authenticator,
        )
    finally:
        lock.close()


def _security(settings: Settings) -> tuple[Any, Any]:
    """The authenticator (None when authentication is disabled) and TLS options (None without a TLS port) the
    settings ask for; SettingsError if a file or key they name cannot be used."""
    authenticator = tls_options = None
    if settings.authentication_enabled:
        from proxy.authentication import Authenticator

        authenticator = Authenticator(settings)
    from proxy.tls import server_options, tls_wanted

    if tls_wanted(settings):
        tls_options = server_options(settings)
    return authenticator, tls_options


if __name__ == "__main__":
    sys.exit(main())
