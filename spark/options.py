"""The options of the ``pulsar`` data source: their names, checking, and typed values.

Spark hands options over case-insensitively (its dict yields lower-cased keys), so names are matched
without case. An option that is neither a source nor a sink option (per direction) fails ``load()`` /
``save()`` / ``start()`` with :class:`OptionError`, naming it, suggesting a close name, and listing
every valid one. Names follow StreamNative's pulsar-spark where it has one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pulsar_txn import InvalidTopicName
from pulsar_txn.core.names import full_topic_name
from spark.backoff import Backoff
from spark.security import PLUGINS, Security

AUTH_PLUGIN = "pulsar.client.authPluginClassName"
AUTH_PARAMS = "pulsar.client.authParams"
TLS_TRUST_CERTS = "pulsar.client.tlsTrustCertsFilePath"
TLS_HOSTNAME_VERIFICATION = "pulsar.client.tlsHostnameVerificationEnable"
TLS_ALLOW_INSECURE = "pulsar.client.tlsAllowInsecureConnection"

#: Options of every connection (source and sink).
CLIENT_OPTIONS = (
    "service.url",
    "reconnectBackoffInitialMs",
    "reconnectBackoffMaxMs",
    "reconnectTimeoutMs",
    # pulsar-spark passes pulsar.client.* to the Java client; these two are its back-off settings.
    "pulsar.client.initialBackoffIntervalNanos",
    "pulsar.client.maxBackoffIntervalNanos",
    # TLS and authentication, as pulsar-spark hands them to the Java client.
    AUTH_PLUGIN,
    AUTH_PARAMS,
    TLS_TRUST_CERTS,
    TLS_HOSTNAME_VERIFICATION,
    TLS_ALLOW_INSECURE,
)

SOURCE_OPTIONS = (
    *CLIENT_OPTIONS,
    "admin.url",
    "topic",
    "topics",
    "topicsPattern",
    "startingOffsets",
    "endingOffsets",
    "startingTime",
    "endingTime",
    "failOnDataLoss",
    "maxRecordsPerTrigger",
    "pollTimeoutMs",
)

SINK_OPTIONS = (
    *CLIENT_OPTIONS,
    "topic",
    "deliveryGuarantee",
    "transactionTimeoutMs",
    "sinkId",
    "commitLogTopic",
    "batchingMaxMessages",
    "checkpointLocation",  # Spark passes a streaming query's own to its sink
)

#: Defaults of the reconnect back-off (milliseconds).
DEFAULT_BACKOFF_INITIAL_MS = 100
DEFAULT_BACKOFF_MAX_MS = 5_000
DEFAULT_RECONNECT_TIMEOUT_MS = 120_000


class OptionError(ValueError):
    """An option is unknown, missing, has a wrong value, or contradicts another."""


def check_names(options: Any, valid: Iterable[str], what: str) -> None:
    """Raise :class:`OptionError` for each option not in ``valid`` (compared without case)."""
    names = {name.lower(): name for name in valid}
    unknown = sorted(key for key in options if key.lower() not in names)
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key.lower(), list(names), n=1, cutoff=0.75)
        hints.append(f"'{key}'" + (f" (did you mean '{names[close[0]]}'?)" if close else ""))
    listed = ", ".join(sorted(names.values(), key=str.lower))
    raise OptionError(f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(hints)} for the pulsar {what}; "
                      f"valid options: {listed}")


def get_int(options: Any, name: str, default: int | None, minimum: int = 0) -> int | None:
    """An integer option (``default`` when absent)."""
    text = options.get(name)
    if text is None or str(text).strip() == "":
        return default
    try:
        value = int(str(text).strip())
    except ValueError:
        raise OptionError(f"option '{name}' must be an integer, not {text!r}") from None
    if value < minimum:
        raise OptionError(f"option '{name}' must be at least {minimum}, not {value}")
    return value


def get_bool(options: Any, name: str, default: bool) -> bool:
    """A boolean option (true/false, 1/0, yes/no)."""
    text = options.get(name)
    if text is None:
        return default
    lowered = str(text).strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise OptionError(f"option '{name}' must be true or false, not {text!r}")


def service_url(options: Any) -> str:
    url = options.get("service.url")
    if not url:
        raise OptionError("option 'service.url' is required (e.g. pulsar://localhost:6650)")
    return str(url)


def backoff(options: Any) -> Backoff:
    """The reconnect back-off (``reconnect*Ms``, or pulsar-spark's ``pulsar.client.*BackoffIntervalNanos``)."""
    initial_ms = get_int(options, "reconnectBackoffInitialMs", None, 1)
    if initial_ms is None:
        nanos = get_int(options, "pulsar.client.initialBackoffIntervalNanos", None, 1)
        initial_ms = DEFAULT_BACKOFF_INITIAL_MS if nanos is None else max(1, nanos // 1_000_000)
    max_ms = get_int(options, "reconnectBackoffMaxMs", None, 1)
    if max_ms is None:
        nanos = get_int(options, "pulsar.client.maxBackoffIntervalNanos", None, 1)
        max_ms = DEFAULT_BACKOFF_MAX_MS if nanos is None else max(1, nanos // 1_000_000)
    total_ms = get_int(options, "reconnectTimeoutMs", DEFAULT_RECONNECT_TIMEOUT_MS, 0)
    assert total_ms is not None
    return Backoff(initial_ms / 1000, max(max_ms, initial_ms) / 1000, total_ms / 1000)


def security(options: Any) -> Security:
    """TLS and credentials of every connection, read once (a token file too) into plain values."""
    trust = options.get(TLS_TRUST_CERTS) or None
    if trust is not None and not Path(trust).is_file():
        raise OptionError(f"option '{TLS_TRUST_CERTS}': no file {trust}")
    tls = {
        "tls_trust_certs_file": trust,
        "tls_validate_hostname": get_bool(options, TLS_HOSTNAME_VERIFICATION, True),
        "tls_allow_insecure_connection": get_bool(options, TLS_ALLOW_INSECURE, False),
    }
    plugin, params = options.get(AUTH_PLUGIN), options.get(AUTH_PARAMS)
    if not plugin:
        if params:
            raise OptionError(f"option '{AUTH_PARAMS}' needs '{AUTH_PLUGIN}' (token, basic or tls)")
        return Security(**tls)  # type: ignore[arg-type]
    if str(plugin).strip() not in PLUGINS:
        raise OptionError(f"option '{AUTH_PLUGIN}': unsupported plugin {plugin!r}; supported: {', '.join(PLUGINS)}")
    if not params:
        raise OptionError(f"option '{AUTH_PLUGIN}' {plugin!r} needs '{AUTH_PARAMS}'")
    try:
        return Security.from_plugin(str(plugin), str(params), **tls)
    except ValueError as exc:
        raise OptionError(f"option '{AUTH_PARAMS}': {exc}") from None


def topic_name(name: str) -> str:
    """The full name of a topic (``my-topic`` -> ``persistent://public/default/my-topic``); a ValueError
    (:class:`OptionError`) if it is not one."""
    try:
        return full_topic_name(name)
    except InvalidTopicName as exc:
        raise OptionError(str(exc)) from None
