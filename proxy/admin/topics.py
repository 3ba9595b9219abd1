"""Topics: ``/admin/v2/{persistent|non-persistent}/{tenant}/{namespace}[/{topic}/...]``.

Creation and deletion of partitioned and non-partitioned topics, partition counts, stats, internal stats, the
last message id, subscriptions (create at a position, delete, reset by time or message id, skip, clear backlog,
expire), peeking and examining messages, termination, compaction and its status, as Pulsar's ``PersistentTopicsBase``
answers them. Of non-persistent topics (in memory only), the loaded ones are listed and their stats given; the other
operations treat them as not found.
"""

from __future__ import annotations

from typing import Any

from engine.clock import now_ms
from engine.compaction import CompactionRunningError
from engine.entry import Entry
from engine.errors import BrokerError
from engine.names import TopicName
from engine.non_persistent import NonPersistentTopic
from engine.policy_enforcer import trim_now
from engine.subscription import Subscription
from engine.topic import Topic
from proxy.admin.bodies import as_int, bean, string_map, unreadable
from proxy.admin.context import AdminContext
from proxy.admin.http import AdminError, Call, Router, absent_reply
from proxy.admin.messages import entry_reply
from proxy.admin.topic_stats import internal_stats, non_persistent_topic_stats, partitioned_stats, topic_stats
from proxy.stats_json import pulsar_time
from wire.message_id import EARLIEST, LATEST, MessageId

V2 = "/admin/v2"
NS = V2 + "/{domain:persistent|non-persistent}/{tenant}/{namespace}"
T = NS + "/{topic}"
SUB = T + "/subscription/{sub}"
_ACTIVE = "Topic has active producers/subscriptions"
#: Bytes of entries a walk through the backlog reads from the log at a time.
_READ_BYTES = 4 * 1024 * 1024


# -- helpers shared with the namespace routes -----------------------------------------------------------


def namespace_topics(ctx: AdminContext, namespace: str) -> list[str]:
    """Persistent topics of a namespace, partitions listed one by one, as ``GET .../topics`` gives them."""
    return ctx.broker.topics_of_namespace(namespace)


def _check_idle(topics: list[Topic | None]) -> None:
    for topic in topics:
        if topic is not None and (topic.producers or any(s.consumers for s in topic.subscriptions.values())):
            raise AdminError(412, _ACTIVE)


# -- names, topics, subscriptions ---------------------------------------------------------------------


def parse_topic(call: Call) -> TopicName:
    """The topic a path names (412 if the name is not valid)."""
    try:
        return TopicName.parse(f"{call['domain']}://{call['tenant']}/{call['namespace']}/{call['topic']}")
    except BrokerError:
        raise AdminError(412, "Topic name is not valid") from None


def _namespace_of(ctx: AdminContext, call: Call) -> str:
    namespace = f"{call['tenant']}/{call['namespace']}"
    if namespace not in ctx.broker.namespaces:
        raise AdminError(404, "Namespace does not exist")
    return namespace


def _require_namespace(ctx: AdminContext, name: TopicName) -> None:
    if name.namespace_name not in ctx.broker.namespaces:
        raise AdminError(404, "Namespace does not exist")


def existing_topic(ctx: AdminContext, name: TopicName) -> Topic:
    """A topic partition or non-partitioned topic that exists (404 otherwise)."""
    _require_namespace(ctx, name)
    broker = ctx.broker
    parent = broker.partitions_of(name.partitioned_parent.full)
    is_partition = name.partition_index >= 0 and parent is not None and name.partition_index < parent
    if name.domain != "persistent" or not (broker.exists(name.full) or is_partition):
        raise AdminError(404, f"Topic {name.full} not found")
    return broker.topic(name.full, create=False)


def _refuse_non_persistent(call: Call, reason: str) -> None:
    """What Pulsar answers an operation on stored messages of a non-persistent topic: 405, whether it exists."""
    if call["domain"] != "persistent":
        raise AdminError(405, reason)


def loaded_non_persistent(ctx: AdminContext, name: TopicName) -> NonPersistentTopic:
    """A non-persistent topic partition that is loaded (404 otherwise: it exists only in memory)."""
    _require_namespace(ctx, name)
    topic = ctx.broker.non_persistent.get(name.full)
    if topic is None:
        raise AdminError(404, f"Topic {name.full} not found")
    return topic


def partitions_of(ctx: AdminContext, name: TopicName) -> int:
    """The partition count of a partitioned topic name, 0 for any other."""
    if name.partition_index >= 0:
        return 0
    return ctx.broker.partitions_of(name.full) or 0


def _partition_topics(ctx: AdminContext, name: TopicName, partitions: int) -> list[Topic]:
    return [ctx.broker.topic(name.partition(i).full) for i in range(partitions)]


def _targets(ctx: AdminContext, name: TopicName) -> list[Topic]:
    """The topic partitions an operation on ``name`` applies to: all partitions, or the topic itself."""
    _require_namespace(ctx, name)
    partitions = partitions_of(ctx, name)
    return _partition_topics(ctx, name, partitions) if partitions else [existing_topic(ctx, name)]


def subscription_of(topic: Topic, sub_name: str) -> Subscription:
    """A subscription of a topic partition (404 otherwise)."""
    sub = topic.subscriptions.get(sub_name)
    if sub is None:
        raise AdminError(404, f"Subscription {sub_name} not found for topic {topic.name.full}")
    return sub


def _no_partitioned(ctx: AdminContext, name: TopicName, reason: str) -> None:
    if partitions_of(ctx, name):
        raise AdminError(405, reason)


def message_id_of(position: Any) -> MessageId:
    """A ``MessageIdImpl``/``ResetCursorData`` JSON body (or the strings ``"earliest"`` / ``"latest"`` that
    ``ResetCursorData`` also reads) as a message id; 400 when it is none."""
    if position == "earliest":
        return EARLIEST
    if position == "latest":
        return LATEST
    if position is None:
        raise AdminError(500, "Request failed.")  # Pulsar's resource dereferences the missing position
    if not isinstance(position, dict):
        raise unreadable(position, "ResetCursorData")
    # A field left out holds -1, one given null 0 (Jackson's zero of a long).
    fields = [
        0 if k in position and position[k] is None else position.get(k, -1)
        for k in ("ledgerId", "entryId", "partitionIndex", "batchIndex")
    ]
    try:
        return MessageId.checked(*(int(v) if isinstance(v, str) else v for v in fields))
    except ValueError:
        raise AdminError(400, "Cannot deserialize the body as a message id") from None


def next_entry_of(topic: Topic, position: Any) -> int:
    """The first entry a subscription reset to a position reads (``excluded`` skips the one it names): as Pulsar,
    ids before the first entry or of earlier ledgers start at the first entry, ids beyond the end or of later
    ledgers at the end."""
    mid = message_id_of(position)
    if isinstance(position, dict) and position.get("excluded", position.get("isExcluded", False)):
        mid = mid._replace(entry=mid.entry + 1)
    return mid.start_entry(topic.ledger_id, topic.first_entry_id(), topic.read_limit + 1)


def _ack_before_index(sub: Subscription, entry_id: int, batch_index: int) -> None:
    """Acknowledge the messages before ``batch_index`` of a batch entry, as a reset to a batch index does."""
    found = sub.topic.read_ids([entry_id])
    if batch_index <= 0 or not found or not found[0].is_batch:
        return
    size = found[0].num_messages
    unacked = None if batch_index >= size else ((1 << size) - 1) & ~((1 << batch_index) - 1)
    sub.acknowledge(None, [(entry_id, unacked)], cumulative=False)


def _message_id(topic: Topic, entry_id: int) -> dict[str, Any]:
    return {"ledgerId": topic.ledger_id, "entryId": entry_id, "partitionIndex": topic.name.partition_index}


def _nth_unacked(topic: Topic, sub: Subscription, n: int) -> Entry | None:
    """The n-th (1-based) entry after the subscription's mark-delete position not acknowledged yet."""
    position, seen = sub.cursor.mark_delete + 1, 0
    while position <= topic.last_confirmed:
        chunk = topic.read(position, min(topic.last_confirmed, position + 199), _READ_BYTES)
        if not chunk:
            return None
        for entry in chunk:
            if not sub.cursor.is_acked(entry.entry_id):
                seen += 1
                if seen == n:
                    return entry
        position = chunk[-1].entry_id + 1
    return None


def _stored_entry(topic: Topic, entry_id: int) -> Entry:
    """The entry of the topic's ledger with that id; as Pulsar's managed ledger, a negative id or one beyond the last
    entry is a server error (500), one no longer stored is not found."""
    if entry_id < 0:
        raise AdminError(500, "Incorrect parameter input error code: -14")
    if entry_id > topic.last_confirmed:
        last = f"{topic.ledger_id}:{topic.last_confirmed}"
        raise AdminError(500, f"LastConfirmedEntry is {last} when reading entry {entry_id}")
    found = topic.read_ids([entry_id])
    if not found:
        raise AdminError(404, "Message not found")
    return found[0]


def skip_entries(sub: Subscription, count: int) -> None:
    """Acknowledge the next ``count`` readable entries not acknowledged yet."""
    topic = sub.topic
    chosen: list[tuple[int, int | None]] = []
    position = sub.cursor.mark_delete + 1
    while len(chosen) < count and position <= topic.read_limit:
        if not sub.cursor.is_acked(position):
            chosen.append((position, None))
        position += 1
    if chosen:
        sub.acknowledge(None, chosen, cumulative=False)


def _body_int(call: Call) -> int:
    """The partition count a body carries, read as Jackson reads an ``int`` (``"3"`` and ``3.0`` too)."""
    return as_int(call.json(required=True))


def _topic_properties(body: Any) -> dict[str, str]:
    """Topic properties from a ``Map<String, String>`` body; a null value fails in Pulsar's map (500)."""
    given = string_map(body)
    if any(value is None for value in given.values()):
        raise AdminError(500, "Request failed.")
    return given  # type: ignore[return-value]


#: The content type of a ``PartitionedTopicMetadata`` body (Pulsar's ``PartitionedTopicMetadata.MEDIA_TYPE``).
PARTITIONED_METADATA_TYPE = "application/vnd.partitioned-topic-metadata+json"


def _partitioned_metadata(call: Call) -> tuple[int, dict[str, str] | None]:
    """The partition count and properties of a topic to create: a ``PartitionedTopicMetadata`` object when the body
    is sent with its content type (as the Java and Go admin clients send it with properties), else a bare ``int``."""
    if call.content_type.split(";", 1)[0].strip().lower() != PARTITIONED_METADATA_TYPE:
        return _body_int(call), None
    body = call.json(required=True)
    if body is None:
        # Pulsar's resource dereferences the missing object.
        raise AdminError(500, "Cannot read the partitions of a null PartitionedTopicMetadata")
    if not isinstance(body, (dict, list)):
        # Jackson builds the object from a lone number with its one-``int`` constructor.
        return as_int(body), None
    metadata = bean(body, "PartitionedTopicMetadata", {"partitions": 0, "properties": None})
    properties = metadata.get("properties")
    if properties is not None:
        properties = string_map(properties)
    return as_int(metadata["partitions"]), properties


def register(router: Router, ctx: AdminContext) -> None:
    """Add the topic routes."""
    broker = ctx.broker

    def owner(call: Call) -> str:
        return f"{ctx.host(call.host)}:{ctx.admin_port}"

    # -- listing ---------------------------------------------------------------------------------

    @router.route("GET", NS)
    def list_topics(call: Call) -> Any:
        namespace = _namespace_of(ctx, call)
        if call["domain"] == "persistent":
            return namespace_topics(ctx, namespace)
        return broker.non_persistent_topics(namespace)

    @router.route("GET", NS + "/partitioned")
    def list_partitioned(call: Call) -> Any:
        namespace = _namespace_of(ctx, call)
        prefix = f"{call['domain']}://"
        return [n for n in broker.partitioned_topics(namespace) if n.startswith(prefix)]

    # -- creation, deletion, partitions -----------------------------------------------------------

    @router.route("PUT", T)
    def create_topic(call: Call) -> Any:
        name = parse_topic(call)
        _require_namespace(ctx, name)
        body = call.json()
        given = None if body is None else string_map(body)
        if partitions_of(ctx, name) or broker.exists(name.full):
            raise AdminError(409, "This topic already exists")
        if name.domain != "persistent":
            # As Pulsar: the topic is loaded (it lives in memory while used); it keeps no properties.
            broker.client_topic(name.full)
            return None
        broker.create_topic(name.full)
        if given:
            if any(value is None for value in given.values()):
                raise AdminError(500, "Request failed.")  # Pulsar's map takes no null value: the topic stays
            broker.namespaces.set_topic_properties(name.full, given)  # type: ignore[arg-type]
        return ctx.committed()

    @router.route("DELETE", T)
    def delete_topic(call: Call) -> Any:
        name = parse_topic(call)
        topic = existing_topic(ctx, name)
        if not call.flag("force"):
            _check_idle([topic])
        broker.delete_topic(name.full)
        if name.partition_index < 0:
            broker.delete_schema(name.full)
        return ctx.committed()

    @router.route("PUT", T + "/partitions")
    def create_partitioned(call: Call) -> Any:
        name = parse_topic(call)
        partitions, properties = _partitioned_metadata(call)
        if partitions <= 0:
            raise AdminError(406, "Number of partitions should be more than 0")
        _require_namespace(ctx, name)
        if partitions_of(ctx, name) or broker.exists(name.full):
            raise AdminError(409, "This topic already exists")
        broker.create_partitioned_topic(name.full, partitions)
        if properties:
            broker.namespaces.set_topic_properties(name.full, properties)
        if name.domain == "persistent":
            for index in range(partitions):
                broker.create_topic(name.partition(index).full)
        return ctx.committed()

    @router.route("POST", T + "/partitions")
    def update_partitions(call: Call) -> Any:
        name = parse_topic(call)
        expected = _body_int(call)
        _require_namespace(ctx, name)
        current = partitions_of(ctx, name)
        if current <= 0:
            raise AdminError(409, f"Topic {name.full} is not the partitioned topic.")
        if expected < current:
            raise AdminError(422, f"Expect partitions {expected} can't less than current partitions {current}.")
        if expected == current:
            return None
        broker.create_partitioned_topic(name.full, expected)
        if name.domain != "persistent":
            return ctx.committed()  # non-persistent partitions exist once used
        first = broker.topic(name.partition(0).full)
        durable = [s for s in first.subscriptions if first.subscriptions[s].durable]
        for index in range(current, expected):
            partition = broker.create_topic(name.partition(index).full)
            for sub_name in durable:
                if sub_name not in partition.subscriptions:
                    partition.create_subscription(sub_name, partition.first_entry_id())
        return ctx.committed()

    @router.route("GET", T + "/partitions")
    def get_partitions(call: Call) -> Any:
        name = parse_topic(call)
        _require_namespace(ctx, name)
        if call.flag("checkAllowAutoCreation"):
            # As Pulsar: with auto-creation on, a missing topic is reported as it will be created.
            partitions = broker.partitioned_metadata(name.full)
            if partitions == 0 and not broker.auto_creation(name)[0]:
                existing_topic(ctx, name)
            return {"partitions": partitions, "deleted": False}
        partitions = partitions_of(ctx, name)
        if partitions == 0:
            existing_topic(ctx, name)
        out: dict[str, Any] = {"partitions": partitions, "deleted": False}
        properties = broker.namespaces.topic_properties(name.full)
        if properties:
            out["properties"] = properties
        return out

    @router.route("DELETE", T + "/partitions")
    def delete_partitioned(call: Call) -> Any:
        name = parse_topic(call)
        _require_namespace(ctx, name)
        partitions = partitions_of(ctx, name)
        if partitions <= 0:
            if broker.exists(name.full):
                raise AdminError(
                    409,
                    f"{name.full} is a non-partitioned topic. Instead of calling delete-partitioned-topic please"
                    " call delete.",
                )
            raise AdminError(404, f"Topic {name.full} not found.")
        if not call.flag("force"):
            _check_idle([broker.topics.get(name.partition(i).full) for i in range(partitions)])
        broker.delete_partitioned_topic(name.full)
        broker.delete_schema(name.full)
        return ctx.committed()

    @router.route("POST", T + "/createMissedPartitions")
    def create_missed(call: Call) -> Any:
        name = parse_topic(call)
        partitions = partitions_of(ctx, name)
        if partitions <= 0:
            raise AdminError(404, f"Topic {name.full} does not exist")
        for index in range(partitions):
            broker.create_topic(name.partition(index).full)
        return ctx.committed()

    @router.route("PUT", T + "/unload")
    def unload(call: Call) -> Any:
        for topic in _targets(ctx, parse_topic(call)):
            broker.unload(topic)
        return None

    @router.route("POST", T + "/trim")
    def trim(call: Call) -> Any:
        # As Pulsar's trimTopic: the closed ledgers retention lets go are deleted now, not at the next check, and
        # the answer comes once the deletion is durable.
        for topic in _targets(ctx, parse_topic(call)):
            trim_now(broker, topic)
        return ctx.committed(absent_reply())

    # -- stats ------------------------------------------------------------------------------------

    @router.route("GET", T + "/stats")
    def stats(call: Call) -> Any:
        name = parse_topic(call)
        if not name.persistent:
            return non_persistent_topic_stats(
                broker.stats,
                loaded_non_persistent(ctx, name),
                owner(call),
                publishers=not call.flag("excludePublishers"),
                consumers=not call.flag("excludeConsumers"),
            )
        topic = existing_topic(ctx, name)
        return topic_stats(
            broker.stats,
            topic,
            owner(call),
            publishers=not call.flag("excludePublishers"),
            consumers=not call.flag("excludeConsumers"),
        )

    @router.route("GET", T + "/partitioned-stats")
    def stats_partitioned(call: Call) -> Any:
        name = parse_topic(call)
        _require_namespace(ctx, name)
        partitions = partitions_of(ctx, name)
        if partitions == 0:
            raise AdminError(404, f"Partitioned Topic {name.full} not found")
        parts = {
            topic.name.full: topic_stats(
                broker.stats,
                topic,
                owner(call),
                publishers=not call.flag("excludePublishers"),
                consumers=not call.flag("excludeConsumers"),
            )
            for topic in _partition_topics(ctx, name, partitions)
        }
        return partitioned_stats(partitions, parts, call.flag("perPartition", True))

    @router.route("GET", T + "/internalStats")
    def stats_internal(call: Call) -> Any:
        return internal_stats(broker.stats, existing_topic(ctx, parse_topic(call)))

    @router.route("GET", T + "/partitioned-internalStats")
    def stats_internal_partitioned(call: Call) -> Any:
        name = parse_topic(call)
        _require_namespace(ctx, name)
        partitions = partitions_of(ctx, name)
        if partitions == 0:
            raise AdminError(404, f"Partitioned Topic {name.full} not found")
        return {
            "metadata": {"partitions": partitions},
            "partitions": {
                t.name.full: internal_stats(broker.stats, t) for t in _partition_topics(ctx, name, partitions)
            },
        }

    @router.route("GET", T + "/lastMessageId")
    def last_message_id(call: Call) -> Any:
        """The last entry of the log, as Pulsar's admin API answers it: open transactions do not hold it back, and
        it may be a transaction's message or marker (the binary GET_LAST_MESSAGE_ID stops at what is readable). A
        batch is named by its last index, with the size fields of Pulsar's ``BatchMessageIdImpl`` left at 0."""
        _refuse_non_persistent(call, "GetLastMessageId on a non-persistent topic is not allowed")
        topic = existing_topic(ctx, parse_topic(call))
        last = topic.last_confirmed
        out = _message_id(topic, last)
        entries = topic.read(last, last) if last >= 0 else []
        if entries and entries[0].is_batch:
            out.update(batchIndex=entries[0].num_messages - 1, batchSize=0)
            out.update(outstandingAcksInSameBatch=0, originalBatchSize=0)
        else:
            out.update(batchIndex=-1, batchSize=0)
        return out

    @router.route("GET", T + "/compaction")
    def compaction_status(call: Call) -> Any:
        compaction = existing_topic(ctx, parse_topic(call)).compaction
        return {"status": compaction.status.value, "lastError": compaction.last_error}

    @router.route("PUT", T + "/compaction")
    def compact(call: Call) -> Any:
        for topic in _targets(ctx, parse_topic(call)):
            try:
                topic.compaction.trigger()
            except CompactionRunningError as exc:
                raise AdminError(409, str(exc)) from None
        return None

    # -- subscriptions ------------------------------------------------------------------------------

    @router.route("GET", T + "/subscriptions")
    def subscriptions(call: Call) -> Any:
        name = parse_topic(call)
        if name.domain != "persistent" and not partitions_of(ctx, name):
            return list(loaded_non_persistent(ctx, name).subscriptions)
        names: list[str] = []
        for topic in _targets(ctx, name):
            names.extend(n for n in topic.subscriptions if n not in names)
        return names

    @router.route("PUT", SUB)
    def create_subscription(call: Call) -> Any:
        name = parse_topic(call)
        body = call.json()
        if body is not None and not isinstance(body, dict | str):
            raise AdminError(400, "Cannot deserialize the body as a message id")
        position = body or "latest"
        _require_namespace(ctx, name)
        partitions = partitions_of(ctx, name)
        if partitions:
            topics = _partition_topics(ctx, name, partitions)
        elif broker.exists(name.full) or (name.partition_index >= 0 and name.domain == "persistent"):
            topics = [existing_topic(ctx, name)]
        else:
            if name.domain != "persistent" or not broker.auto_creation(name)[0]:
                raise AdminError(412, "Topic does not exist and cannot be auto-created")
            topics = [broker.topic(name.full)]
        missing = [t for t in topics if call["sub"] not in t.subscriptions]
        if not missing:
            raise AdminError(409, "Subscription already exists for topic")
        for topic in missing:
            topic.create_subscription(call["sub"], next_entry_of(topic, position))
        return ctx.committed()

    @router.route("DELETE", SUB)
    def delete_subscription(call: Call) -> Any:
        topics = _targets(ctx, parse_topic(call))
        subs = [t.subscriptions[call["sub"]] for t in topics if call["sub"] in t.subscriptions]
        if not subs:
            subscription_of(topics[0], call["sub"])
        if not call.flag("force") and any(s.consumers for s in subs):
            raise AdminError(412, "Subscription has active connected consumers")
        for sub in subs:
            sub.close_consumers()
            sub.topic.remove_subscription(sub)
        return ctx.committed()

    def each_subscription(call: Call) -> list[Subscription]:
        return [subscription_of(t, call["sub"]) for t in _targets(ctx, parse_topic(call))]

    @router.route("POST", SUB + "/resetcursor/{timestamp}")
    def reset_by_time(call: Call) -> Any:
        timestamp = call.path_integer("timestamp")
        name = parse_topic(call)
        if name.domain != "persistent" and not partitions_of(ctx, name):
            loaded_non_persistent(ctx, name)
            return None  # as Pulsar: nothing is stored to move to
        for sub in each_subscription(call):
            sub.reset(sub.topic.entry_at_time(timestamp))
            sub.close_consumers()
        return ctx.committed()

    @router.route("POST", SUB + "/resetcursor")
    def reset_by_position(call: Call) -> Any:
        name = parse_topic(call)
        body = call.json(required=True)
        message_id_of(body)  # read before anything else, as Jersey reads it
        _no_partitioned(ctx, name, "Reset-cursor at position is not allowed for partitioned-topic")
        sub = subscription_of(existing_topic(ctx, name), call["sub"])
        entry = next_entry_of(sub.topic, body)
        sub.reset(entry)
        mid = message_id_of(body)
        if (mid.ledger, mid.entry) == (sub.topic.ledger_id, entry):
            _ack_before_index(sub, entry, mid.batch_index)
        sub.close_consumers()
        return ctx.committed()

    @router.route("POST", SUB + "/skip/{count}")
    def skip(call: Call) -> Any:
        name = parse_topic(call)
        count = call.path_integer("count")
        _no_partitioned(ctx, name, "Skip messages on a partitioned topic is not allowed")
        skip_entries(subscription_of(existing_topic(ctx, name), call["sub"]), count)
        return ctx.committed()

    @router.route("POST", SUB + "/skip_all")
    def skip_all(call: Call) -> Any:
        for sub in each_subscription(call):
            sub.acknowledge_upto(sub.topic.read_limit)
        return ctx.committed()

    @router.route("POST", SUB + "/expireMessages/{seconds}")
    def expire(call: Call) -> Any:
        _refuse_non_persistent(call, "Expire messages on a non-persistent topic is not allowed")
        seconds = call.path_integer("seconds")
        cutoff = now_ms(broker.clock) - seconds * 1000
        for sub in each_subscription(call):
            sub.expire_before(cutoff)
        return ctx.committed()

    @router.route("POST", T + "/all_subscription/expireMessages/{seconds}")
    def expire_all(call: Call) -> Any:
        _refuse_non_persistent(call, "Expire messages for all subscriptions on a non-persistent topic is not allowed")
        seconds = call.path_integer("seconds")
        cutoff = now_ms(broker.clock) - seconds * 1000
        for topic in _targets(ctx, parse_topic(call)):
            for sub in list(topic.subscriptions.values()):
                sub.expire_before(cutoff)
        return ctx.committed()

    # -- messages -----------------------------------------------------------------------------------

    @router.route("GET", SUB + "/position/{position}")
    def peek(call: Call) -> Any:
        _refuse_non_persistent(call, "Peek messages on a non-persistent topic is not allowed")
        name = parse_topic(call)
        position = call.path_integer("position")
        _no_partitioned(ctx, name, "Peek messages on a partitioned topic is not allowed")
        topic = existing_topic(ctx, name)
        sub = topic.subscriptions.get(call["sub"])
        if sub is None:
            # As Pulsar: peeking a subscription that does not exist creates it, at the first entry.
            sub = topic.create_subscription(call["sub"], topic.first_entry_id())
        entry = _nth_unacked(topic, sub, max(position, 1))
        if entry is None:
            raise AdminError(404, "Message not found")
        return entry_reply(topic, entry)

    @router.route("GET", T + "/examinemessage")
    def examine(call: Call) -> Any:
        _refuse_non_persistent(call, "Examine messages on a non-persistent topic is not allowed")
        name = parse_topic(call)
        _no_partitioned(
            ctx,
            name,
            "Examine messages on a partitioned topic is not allowed, please try examine message on specific topic"
            " partition",
        )
        topic = existing_topic(ctx, name)
        total, _ = broker.stats.storage.of(topic)
        if total <= 0:
            raise AdminError(412, "Could not examine messages due to the total message is zero")
        position = max(call.integer("messagePosition", 1) or 1, 1)
        if (call.query.get("initialPosition") or "latest") == "earliest":
            entry_id = min(topic.first_entry_id() + position - 1, topic.last_confirmed)
        else:
            entry_id = topic.last_confirmed - position + 1
        return entry_reply(topic, _stored_entry(topic, entry_id))

    @router.route("GET", T + "/ledger/{ledger}/entry/{entry}")
    def message_by_id(call: Call) -> Any:
        name = parse_topic(call)
        _no_partitioned(ctx, name, "GetMessageById is not allowed on partitioned-topic")
        topic = existing_topic(ctx, name)
        ledger, entry_id = call.path_integer("ledger"), call.path_integer("entry")
        if ledger != topic.ledger_id:
            raise AdminError(404, "Message id not found")
        return entry_reply(topic, _stored_entry(topic, entry_id))

    @router.route("GET", T + "/messageid/{timestamp}")
    def message_id_by_time(call: Call) -> Any:
        name = parse_topic(call)
        _no_partitioned(
            ctx,
            name,
            "Get message ID by timestamp on a partitioned topic is not allowed, please try do it on specific topic"
            " partition",
        )
        topic = existing_topic(ctx, name)
        timestamp = call.path_integer("timestamp")
        entry_id = topic.entry_at_time(timestamp)
        if entry_id > topic.last_confirmed:
            return None
        return _message_id(topic, entry_id)

    # -- properties and internal info ------------------------------------------------------------

    def properties_target(call: Call) -> TopicName:
        """The topic whose properties a request names: a partitioned topic, or a topic partition that exists."""
        name = parse_topic(call)
        if name.domain != "persistent":
            raise AdminError(406, "Need to provide a persistent topic name")
        if not partitions_of(ctx, name):
            existing_topic(ctx, name)
        return name

    @router.route("GET", T + "/properties")
    def get_properties(call: Call) -> Any:
        name = properties_target(call)
        properties = broker.namespaces.topic_properties(name.full)
        if properties is None and partitions_of(ctx, name):
            return absent_reply()
        return properties or {}

    @router.route("PUT", T + "/properties")
    def update_properties(call: Call) -> Any:
        body = call.json()
        if body is not None:
            string_map(body)  # read before anything else, as Jersey reads it
        name = properties_target(call)
        if body is None:
            return None
        given = _topic_properties(body)
        current = broker.namespaces.topic_properties(name.full) or {}
        broker.namespaces.set_topic_properties(name.full, {**current, **given})
        return None

    @router.route("DELETE", T + "/properties")
    def remove_property(call: Call) -> Any:
        name = properties_target(call)
        current = broker.namespaces.topic_properties(name.full)
        key = call.query.get("key")
        if current is not None and key in current:
            del current[key]
            broker.namespaces.set_topic_properties(name.full, current)
        return None

    def ledger_info(topic: Topic) -> dict[str, Any]:
        """A ``ManagedLedgerInfo`` of a topic partition: its one ledger, its durable cursors, its properties."""
        created = pulsar_time(broker.created_ms(topic.name.full) or broker.stats.started_ms)
        cursors = {
            sub_name: {"version": 0, "creationDate": created, "modificationDate": created, "cursorsLedgerId": -1}
            for sub_name, sub in topic.subscriptions.items()
            if sub.durable
        }
        out: dict[str, Any] = {
            "version": 0,
            "creationDate": created,
            "modificationDate": created,
            "ledgers": [{"ledgerId": topic.ledger_id, "timestamp": broker.stats.started_ms, "isOffloaded": False}],
            "cursors": cursors,
        }
        properties = broker.namespaces.topic_properties(topic.name.full)
        if properties:
            out["properties"] = properties
        return out

    @router.route("GET", T + "/internal-info")
    def internal_info(call: Call) -> Any:
        name = parse_topic(call)
        _require_namespace(ctx, name)
        partitions = partitions_of(ctx, name)
        if partitions:
            return {
                "version": 0,
                "partitions": {t.name.full: ledger_info(t) for t in _partition_topics(ctx, name, partitions)},
            }
        return ledger_info(existing_topic(ctx, name))

    # -- termination ----------------------------------------------------------------------------

    @router.route("POST", T + "/terminate")
    def terminate(call: Call) -> Any:
        name = parse_topic(call)
        if name.domain != "persistent":
            raise AdminError(406, "Need to provide a persistent topic name")
        _no_partitioned(ctx, name, "Termination of a partitioned topic is not allowed")
        topic = existing_topic(ctx, name)
        return ctx.committed(_message_id(topic, broker.terminate(topic)))

    @router.route("POST", T + "/terminate/partitions")
    def terminate_partitions(call: Call) -> Any:
        name = parse_topic(call)
        partitions = partitions_of(ctx, name)
        if partitions == 0:
            raise AdminError(
                405,
                "Termination of a non-partitioned topic is not allowed using partitioned-terminate, please use"
                " terminate commands",
            )
        result = {
            str(i): _message_id(t, broker.terminate(t)) for i, t in enumerate(_partition_topics(ctx, name, partitions))
        }
        return ctx.committed(result)
