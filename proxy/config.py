"""Settings of the server, from the command line, the environment, a TOML file and defaults.

Precedence: command line > ``PULSAR_TXN_PROXY_<OPTION>`` environment variables > ``--config`` file
> defaults. Option ``data-dir`` is ``--data-dir``, ``PULSAR_TXN_PROXY_DATA_DIR`` and ``data-dir``
(or ``data_dir``) in the file.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_PREFIX = "PULSAR_TXN_PROXY_"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: The largest max message size: a frame (the message and 10 KiB of headers) must fit a Java ``int``, as in Pulsar.
MAX_MESSAGE_SIZE_LIMIT = 2**31 - 1 - 10 * 1024


@dataclass(frozen=True)
class Settings:
    """Every setting of ``pulsar-txn-proxy serve``."""

    host: str = "0.0.0.0"
    port: int = 6650
    admin_port: int = 8080
    data_dir: str = "./data"
    advertised_address: str | None = None
    #: Connections the kernel queues before the server accepts them: a burst of clients connecting at once is
    #: not dropped (Twisted's default of 50 drops SYNs under such a burst).
    listen_backlog: int = 1024
    #: Partitions of auto-created topics (0: non-partitioned, as in Pulsar).
    default_partitions: int = 0
    #: Drop re-sent messages by producer name and sequence id.
    deduplication: bool = False
    log_level: str = "INFO"
    #: Transaction coordinators: partitions of the coordinator-assign system topic.
    transaction_coordinators: int = 16
    #: A transaction buffer snapshots after this many transaction ends...
    txn_snapshot_max_changes: int = 1000
    #: ...or this many seconds after a change.
    txn_snapshot_interval_seconds: int = 5
    #: Testing aid: pause between a transaction's COMMITTING/ABORTING record and its markers.
    txn_end_delay_ms: int = 0
    #: Seconds between applications of the namespaces' message TTL and retention policies.
    policy_check_interval_seconds: int = 60
    #: Seconds between keep-alive checks of a connection (Pulsar's keepAliveIntervalSeconds): a peer silent for a
    #: whole interval gets a PING and is dropped if it is still silent at the next check.
    keep_alive_interval_seconds: int = 30
    #: Seconds a new connection may take to send CONNECT.
    handshake_timeout_seconds: int = 10
    #: Seconds a frame that has begun to arrive may take to arrive whole.
    frame_timeout_seconds: int = 30
    #: MiB of entries all topics keep in memory together for dispatch (Pulsar's managedLedgerCacheSizeMB): memory
    #: does not grow with the number of topics; older entries are read from the store.
    managed_ledger_cache_size_mb: int = 128
    #: When a topic's ledger rolls over (Pulsar's settings and defaults): at this many entries once it is at least
    #: the minimum time old, or at the maximum time. Retention, and without a retention policy the broker's default
    #: of keeping nothing acknowledged, deletes acknowledged data a whole closed ledger at a time.
    managed_ledger_max_entries_per_ledger: int = 50_000
    managed_ledger_min_ledger_rollover_time_minutes: int = 10
    managed_ledger_max_ledger_rollover_time_minutes: int = 240
    #: Retention of topics without a policy (Pulsar's defaultRetentionTimeInMinutes / defaultRetentionSizeInMB):
    #: 0 keeps nothing acknowledged once its ledger is closed, -1 sets no limit (both -1: keep everything).
    default_retention_time_in_minutes: int = 0
    default_retention_size_in_mb: int = 0
    #: Failover subscriptions: milliseconds from a change of active consumer to the notices to the consumers and the
    #: new active one's first messages (Pulsar's activeConsumerFailoverDelayTimeMillis, 1000 there by default; 0
    #: here: at once).
    active_consumer_failover_delay_time_millis: int = 0
    # -- message size (issue 23 item 8) --
    #: The largest message taken, in bytes (Pulsar's maxMessageSize): advertised in CONNECTED, so clients batch and
    #: chunk by it; a frame larger than it plus 10 KiB closes its connection.
    max_message_size: int = 5 * 1024 * 1024
    # -- advertised listeners (issue 23 item 12) --
    #: Named addresses of this endpoint that lookups ask for by name (Pulsar's advertisedListeners):
    #: ``name:pulsar://host:port`` items, a name may also have one ``pulsar+ssl://`` URL, separated by commas.
    advertised_listeners: str | None = None
    #: The listener whose addresses answer lookups that name none (Pulsar's internalListenerName; default: the first).
    internal_listener_name: str | None = None
    # -- TLS and authentication (issue 21), named after broker.conf's settings -----------------------------------
    #: Pulsar protocol over TLS (brokerServicePortTls, ``pulsar+ssl://``) and admin API over https
    #: (webServicePortTls); unset: no TLS listener. The plain ports stay open beside them, as in Pulsar.
    tls_port: int | None = None
    admin_tls_port: int | None = None
    #: PEM files: this server's certificate (chain) and key, and the CAs client certificates are checked against.
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_trust_certs_file: str | None = None
    #: Refuse a TLS client without a certificate signed by a trusted CA (tlsRequireTrustedClientCertOnConnect).
    tls_require_trusted_client_cert: bool = False
    #: Authenticate every connection and admin request (authenticationEnabled) with these providers, a comma
    #: list of ``token``, ``basic`` and ``tls`` (authenticationProviders).
    authentication_enabled: bool = False
    authentication_providers: str = ""
    #: Token validation key: the HMAC secret (tokenSecretKey) or the public key (tokenPublicKey, algorithm
    #: tokenPublicAlg): a file path, ``file://`` URL, ``data:;base64,`` URL or ``env:VARIABLE``.
    token_secret_key: str | None = None
    token_public_key: str | None = None
    token_public_alg: str = "RS256"
    #: The claim naming a token's role (tokenAuthClaim).
    token_auth_claim: str = "sub"
    #: ``user:hash`` lines (crypt or ``$apr1$``), as a path, ``file:`` or ``data:`` URL (basicAuthConf).
    basic_auth_conf: str | None = None
    #: Seconds between checks of a connection's credentials for expiry, when AUTH_CHALLENGE asks the client for
    #: fresh ones (authenticationRefreshCheckSeconds).
    authentication_refresh_check_seconds: int = 60
    #: Whether GET /metrics needs credentials too (authenticateMetricsEndpoint).
    authenticate_metrics_endpoint: bool = False
    # -- authorization (issue 21), named after broker.conf's settings -------------------------------------------
    #: Check each role's permissions on the Pulsar protocol and the admin API (authorizationEnabled).
    authorization_enabled: bool = False
    #: Comma list of the roles that may do anything (superUserRoles).
    super_user_roles: str = ""
    #: The role of a client that presents no credentials while authentication is enabled (anonymousUserRole);
    #: unset, such a client is refused.
    anonymous_user_role: str | None = None


FIELDS = {f.name: f for f in dataclasses.fields(Settings)}


class SettingsError(ValueError):
    """A setting has an unknown name or a value of the wrong type."""


def _convert(name: str, value: Any) -> Any:
    kind = FIELDS[name].type.removesuffix(" | None")
    if isinstance(value, str):
        if kind == "int":
            try:
                return int(value)
            except ValueError:
                raise SettingsError(f"{name}: expected an integer, got {value!r}") from None
        if kind == "bool":
            lowered = value.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise SettingsError(f"{name}: expected true or false, got {value!r}")
        return value
    if kind == "int" and (not isinstance(value, int) or isinstance(value, bool)):
        raise SettingsError(f"{name}: expected an integer, got {value!r}")
    if kind == "bool" and not isinstance(value, bool):
        raise SettingsError(f"{name}: expected true or false, got {value!r}")
    return value


def _from_file(path: str) -> dict[str, Any]:
    import tomllib  # only with --config: keeps it off the start-up path

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"cannot read config file {path}: {exc}") from None
    values = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name not in FIELDS:
            raise SettingsError(f"{path}: unknown setting {key!r}")
        values[name] = _convert(name, value)
    return values


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    values = {}
    for name in FIELDS:
        raw = environ.get(ENV_PREFIX + name.upper())
        if raw is not None:
            values[name] = _convert(name, raw)
    return values


def load(cli: Mapping[str, Any], config_file: str | None, environ: Mapping[str, str] = os.environ) -> Settings:
    """Merge the sources; ``cli`` holds only the options given on the command line."""
    values: dict[str, Any] = {}
    if config_file:
        values.update(_from_file(config_file))
    values.update(_from_env(environ))
    values.update({k: v for k, v in cli.items() if v is not None})
    settings = Settings(**values)
    if settings.log_level.upper() not in LOG_LEVELS:
        raise SettingsError(f"log_level: expected one of {', '.join(LOG_LEVELS)}, got {settings.log_level!r}")
    for name in (
        "listen_backlog",
        "keep_alive_interval_seconds",
        "handshake_timeout_seconds",
        "frame_timeout_seconds",
        "authentication_refresh_check_seconds",
    ):
        if getattr(settings, name) < 1:
            raise SettingsError(f"{name}: expected a positive integer, got {getattr(settings, name)}")
    if not 1 <= settings.max_message_size <= MAX_MESSAGE_SIZE_LIMIT:
        raise SettingsError(f"max_message_size: expected 1..{MAX_MESSAGE_SIZE_LIMIT}, got {settings.max_message_size}")
    if settings.internal_listener_name and not settings.advertised_listeners:
        raise SettingsError("internal_listener_name: set without advertised_listeners")
    if settings.advertised_listeners:
        from proxy.listeners import ListenerConfigError, Listeners

        try:
            Listeners.parse(settings.advertised_listeners, settings.internal_listener_name)
        except ListenerConfigError as exc:
            raise SettingsError(f"advertised_listeners: {exc}") from None
    return settings


def super_user_roles(settings: Settings) -> tuple[str, ...]:
    """The roles of ``super-user-roles``, as Pulsar splits its comma list (blanks dropped)."""
    return tuple(role.strip() for role in settings.super_user_roles.split(",") if role.strip())


def data_path(settings: Settings) -> Path:
    """The data directory, created if missing."""
    path = Path(settings.data_dir)
    path.mkdir(parents=True, exist_ok=True)
    return path
