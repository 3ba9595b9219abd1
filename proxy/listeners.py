"""Advertised listeners (Pulsar's ``advertisedListeners`` and ``internalListenerName``): named addresses of this
endpoint, each with a ``pulsar://`` and optionally a ``pulsar+ssl://`` URL, so that clients inside and outside a
network each reach it by the address that works for them. A lookup names the listener whose addresses it wants.

``internal:pulsar://10.0.0.5:6650,external:pulsar://broker.example.com:16650,external:pulsar+ssl://broker.example.com:16651``
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from engine.errors import BrokerError
from wire.pulsar_api_pb2 import ServerError

_SCHEMES = ("pulsar", "pulsar+ssl")


class ListenerConfigError(ValueError):
    """Advertised listeners that do not parse, or an internal listener name that names none of them."""


@dataclass(frozen=True)
class Listener:
    """One named listener's addresses."""

    name: str
    service_url: str | None = None
    service_url_tls: str | None = None


@dataclass(frozen=True)
class Listeners:
    """Every advertised listener, and the internal one that lookups naming no listener are answered from."""

    by_name: dict[str, Listener]
    internal: Listener

    @classmethod
    def parse(cls, text: str, internal_name: str | None = None) -> Listeners:
        """Read ``name:url,name:url,...`` as Pulsar reads ``advertisedListeners``: at most one ``pulsar://`` and one
        ``pulsar+ssl://`` URL per name, each with a host and a port; the internal listener is ``internal_name``,
        else the first one."""
        urls: dict[str, dict[str, str]] = {}
        for item in (part.strip() for part in text.split(",")):
            name, sep, url = item.partition(":")
            name = name.strip()
            if not sep or not name:
                raise ListenerConfigError(f"advertised listener {item!r}: expected <name>:<url>")
            try:
                parts = urlsplit(url.strip())
                port = parts.port
            except ValueError:
                port = None
                parts = None
            if parts is None or parts.scheme not in _SCHEMES or not parts.hostname or port is None:
                raise ListenerConfigError(
                    f"advertised listener {name!r}: {url.strip()!r} is not a pulsar:// or pulsar+ssl:// URL with "
                    "a host and a port"
                )
            if parts.scheme in urls.setdefault(name, {}):
                raise ListenerConfigError(f"there are redundant configure for listener `{name}`")
            urls[name][parts.scheme] = f"{parts.scheme}://{parts.netloc}"
        by_name = {
            name: Listener(name, schemes.get("pulsar"), schemes.get("pulsar+ssl")) for name, schemes in urls.items()
        }
        internal = by_name.get(internal_name or next(iter(by_name)))
        if internal is None:
            raise ListenerConfigError(
                f"the advertised listeners do not contain the internal listener name {internal_name!r}"
            )
        return cls(by_name, internal)

    @property
    def broker_url_tls(self) -> str | None:
        """The ``pulsar+ssl://`` URL answered when no listener is named: the internal listener's, else the first
        listener's that has one (as Pulsar's broker picks its TLS URL)."""
        if self.internal.service_url_tls:
            return self.internal.service_url_tls
        return next((item.service_url_tls for item in self.by_name.values() if item.service_url_tls), None)


def unknown_listener(name: str) -> BrokerError:
    """Pulsar's answer to a lookup naming a listener it does not advertise (the clients retry it until timeout)."""
    return BrokerError(ServerError.ServiceNotReady, f"the broker do not have {name} listener")
