"""Topic names: ``{persistent|non-persistent}://tenant/namespace/local[-partition-N]``."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from engine.errors import BrokerError
from wire.pulsar_api_pb2 import ServerError

PARTITION_SUFFIX = "-partition-"
_NAMED = re.compile(r"^[-=:.\w]+$")
_DOMAINS = ("persistent", "non-persistent")
DEFAULT_NAMESPACE = "public/default"


def valid_namespace(name: str) -> bool:
    """Whether ``tenant/namespace`` (or the older ``tenant/cluster/namespace``) is a namespace name Pulsar accepts."""
    parts = name.split("/")
    return len(parts) in (2, 3) and all(_NAMED.match(part) for part in parts)


@dataclass(frozen=True, slots=True)
class TopicName:
    """A parsed, validated topic name."""

    domain: str
    tenant: str
    namespace: str
    local: str
    #: ``domain://tenant/namespace/local``, built once: commands and sends look topics up by it.
    full: str = field(init=False, repr=False, compare=False)
    #: The partition number of a ``-partition-N`` name, or -1 (found once: every dispatch sends it).
    partition_index: int = field(init=False, repr=False, compare=False)
    #: The name of the partitioned topic of a partition, once asked for (see :attr:`partitioned_parent`).
    _parent: TopicName | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        object.__setattr__(self, "full", f"{self.domain}://{self.tenant}/{self.namespace}/{self.local}")
        base, sep, index = self.local.rpartition(PARTITION_SUFFIX)
        object.__setattr__(self, "partition_index", int(index) if sep and base and index.isdecimal() else -1)

    @classmethod
    @functools.lru_cache(maxsize=65536)  # names are immutable, and parsing runs on every command
    def parse(cls, name: str) -> TopicName:
        """Parse a full or short name (``my-topic`` means ``persistent://public/default/my-topic``)."""
        if "://" in name:
            domain, _, rest = name.partition("://")
        else:
            domain, rest = "persistent", name
            if "/" not in rest:
                rest = f"{DEFAULT_NAMESPACE}/{rest}"
        parts = rest.split("/")
        if domain not in _DOMAINS or len(parts) != 3:
            raise BrokerError(ServerError.InvalidTopicName, f"Invalid topic name: {name}")
        tenant, namespace, local = parts
        if not (_NAMED.match(tenant) and _NAMED.match(namespace)) or not local or local.strip() != local:
            raise BrokerError(ServerError.InvalidTopicName, f"Invalid topic name: {name}")
        return cls(domain, tenant, namespace, local)

    @property
    def persistent(self) -> bool:
        """Whether the topic stores its messages (``persistent://``) or only hands them on (``non-persistent://``)."""
        return self.domain == "persistent"

    @property
    def namespace_name(self) -> str:
        return f"{self.tenant}/{self.namespace}"

    @property
    def partitioned_parent(self) -> TopicName:
        """The partitioned topic this partition belongs to (itself if it is no partition)."""
        if self.partition_index < 0:
            return self
        parent = self._parent
        if parent is None:  # built once: policies and limits are looked up by it on every subscribe and send
            parent = TopicName(self.domain, self.tenant, self.namespace, self.local.rpartition(PARTITION_SUFFIX)[0])
            object.__setattr__(self, "_parent", parent)
        return parent

    @property
    def schema_name(self) -> str:
        """``tenant/namespace/local`` of the partitioned topic: the name of the schema its partitions share."""
        parent = self.partitioned_parent
        return f"{parent.tenant}/{parent.namespace}/{parent.local}"

    def partition(self, index: int) -> TopicName:
        """The name of partition ``index`` of this topic."""
        return TopicName(self.domain, self.tenant, self.namespace, f"{self.local}{PARTITION_SUFFIX}{index}")

    def __str__(self) -> str:
        return self.full
