"""Consume-transform-produce with :mod:`pulsar_txn`'s sans-I/O core against the real server in the simulator.

A seed chooses the options (partitions, network, crashes, resets, abort rate, batching, subscription type). A source
producer (deduplicated: it sends again what was in flight after every reconnection) writes plain messages to the
input topic, for some seeds a transactional one writes more in transactions it commits or aborts; 1-2 workers take a
few inputs at a time and, in one transaction each turn, send one output per input and acknowledge the inputs, then
commit, or now and then abort (the consumer's queue is then redelivered as the Java client does on an exclusive or
failover subscription). Network faults, connection resets and at least one server crash come until the faults heal;
the workload then has :data:`LIVENESS_SECONDS` to finish. After a last crash an audit consumer reads the output
topic from the start and a leftover consumer the input subscription.

The checks: every input appears in exactly one output (committed exactly once; everything consumed: liveness), no
input or output of an aborted transaction is delivered, every output of a committed transaction is, nothing is left
on the input subscription, the source's every message was receipted.

Run more seeds with ``python -m tests.sim.core_scenario FIRST LAST``.
"""

from __future__ import annotations

import logging
import random
import sys
from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from pulsar_txn.core.consumer import ConsumerConfig, ConsumerCore, ReceivedMessage
from pulsar_txn.core.producer import OutMessage, ProducerConfig, ProducerCore
from pulsar_txn.core.transaction import TransactionCore, TxnId
from pulsar_txn.exceptions import PulsarException
from tests.sim.client import Future, gather, sleep, spawn
from tests.sim.core_runtime import SimCoreClient
from tests.sim.scenario import Options, World, partition
from wire.pulsar_api_pb2 import BaseCommand, CommandSubscribe

T = BaseCommand
IN = "persistent://public/default/core-in"
OUT = "persistent://public/default/core-out"
#: Simulated seconds the workload has after the faults heal to finish (liveness).
LIVENESS_SECONDS = 90.0
#: Simulated seconds the audit and leftover consumers read.
AUDIT_SECONDS = 10.0
#: Transactions' timeout (the coordinator aborts one left open this long).
TXN_TIMEOUT_MS = 10_000
Task = Generator[Future, Any, None]


@dataclass
class CoreOptions:
    """What a seed chooses besides the world's :class:`~tests.sim.scenario.Options`."""

    messages: int
    workers: int
    batch: int
    abort_rate: float
    sub_type: int
    batching: bool
    receiver_queue: int
    #: Transactions of 1-3 input messages the transactional source commits or aborts (0: none).
    source_txns: int = 0
    #: How often a worker stalls past its transaction's timeout before ending it (until the faults heal): the
    #: coordinator aborts the transaction, the client sees it TIME_OUT and aborts it too.
    stall_rate: float = 0.0

    @classmethod
    def from_seed(cls, seed: int) -> tuple[CoreOptions, Options]:
        rng = random.Random(f"core-{seed}")
        partitions = rng.randint(2, 3)
        heal = round(rng.uniform(25.0, 60.0), 3)
        crashes = sorted(
            (round(rng.uniform(3.0, heal), 3), rng.choice(["now", "now", "in-write", "after-write"]))
            for _ in range(rng.choice([1, 1, 2]))
        )
        actors = ["src", "w0", "w1"]
        resets = sorted((round(rng.uniform(2.0, heal), 3), rng.choice(actors)) for _ in range(rng.randint(0, 3)))
        workers = rng.randint(1, 2)
        world = Options(
            seed=seed,
            partitions=partitions,
            coordinators=rng.randint(1, 3),
            latency=rng.choice([0.0002, 0.001, 0.01]),
            jitter=rng.choice([0.0, 0.002, 0.02]),
            short_reads=rng.choice([0.0, 0.1, 0.5]),
            stalls=rng.choice([0.0, 0.0, 0.01]),
            commit_delay=rng.choice([0.0, 0.002, 0.05]),
            crashes=crashes,
            disk_full=sorted(
                (round(rng.uniform(2.0, heal), 3), round(rng.uniform(0.5, 8.0), 3)) for _ in range(rng.choice([0, 1]))
            ),
            resets=resets,
            heal=heal,
        )
        core = cls(
            messages=rng.randint(30, 50),
            workers=workers,
            batch=rng.randint(1, 4),
            abort_rate=rng.choice([0.1, 0.2, 0.3]),
            sub_type=rng.choice([CommandSubscribe.Shared, CommandSubscribe.Failover]),
            batching=rng.random() < 0.5,
            receiver_queue=rng.choice([4, 10, 1000]),
        )
        # Drawn apart, so that adding it changed none of the other options.
        core.source_txns = random.Random(f"core-{seed}-txsrc").choice([0, 4, 8])
        core.stall_rate = random.Random(f"core-{seed}-stall").choice([0.0, 0.0, 0.1])
        return core, world


@dataclass
class TxnOutcome:
    """A worker's transaction: its outputs (payloads) and how it ended: committed, aborted, unknown (END_TXN got no
    answer) or open (left without END_TXN: the coordinator aborts it when it times out)."""

    outputs: list[str] = field(default_factory=list)
    state: str = "open"


def _payload(message: ReceivedMessage) -> str:
    return message.payload.decode()


class CoreScenario:
    """One seeded run."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.options, world_options = CoreOptions.from_seed(seed)
        self.world = World(world_options)
        self.txns: dict[TxnId, TxnOutcome] = {}
        self.counters: Counter[str] = Counter()
        #: Inputs that must be transformed exactly once (plain, or of a committed transaction); inputs of a
        #: transaction whose END_TXN got no answer (at most once); of an aborted or abandoned one (never delivered).
        self.sent: set[str] = set()
        self.maybe: set[str] = set()
        self.never: set[str] = set()
        #: Every input a worker took.
        self.delivered: list[str] = []
        self.audited: list[str] = []
        self.leftover: list[str] = []
        self.failures: list[str] = []

    # -- the run ------------------------------------------------------------------------------------

    def run(self) -> CoreScenario:
        logging.disable(logging.CRITICAL)
        world, o = self.world, self.world.options
        sched = world.sched
        world.start_server()
        setup = Setup(self)
        spawn(sched, setup.run())
        sched.run_until(30.0, stop=lambda: setup.done)
        sched.run_until(2.0)
        source = Source(self)
        workers = [Worker(self, n) for n in range(self.options.workers)]
        for actor in (source, TxnSource(self), *workers):
            spawn(sched, actor.run())
        world.schedule_faults()
        sched.run_until(o.heal + LIVENESS_SECONDS)
        world.stopping = True
        sched.run_until(sched.now + 5.0)
        world.crash("final crash", final=True)
        sched.run_until(sched.now + 1.0)
        spawn(sched, Reader(self, "audit", OUT, self.audited).run())
        spawn(sched, Reader(self, "ctp", IN, self.leftover).run())
        sched.run_until(sched.now + AUDIT_SECONDS)
        self.counters.update(world.counters)
        self.counters["messages"] = self.options.messages
        self._check(source)
        return self

    def _check(self, source: Source) -> None:
        fail = self.failures.append
        if self.world.sched.runaway is not None:
            fail(f"runaway: the event budget ran out at simulated second {self.world.sched.runaway:.3f}")
        if not self.world.counters["crash"]:
            fail("no crash came")
        if source.unreceipted:
            fail(f"source messages never receipted: {sorted(source.unreceipted)}")
        inputs = Counter(out.split("|")[0] for out in self.audited)
        for key in sorted(self.sent):
            if inputs[key] != 1:
                fail(f"input {key} appears in {inputs[key]} outputs (expected exactly 1)")
        for key in sorted(self.maybe):
            if inputs[key] > 1:
                fail(f"input {key} (its transaction's outcome unknown) appears in {inputs[key]} outputs")
        for key in sorted(self.never & {*inputs, *self.delivered}):
            fail(f"input {key} of an aborted transaction was delivered")
        unknown = set(inputs) - self.sent - self.maybe - self.never
        if unknown:
            fail(f"outputs of inputs never sent: {sorted(unknown)}")
        by_output = {out: txn for txn, rec in self.txns.items() for out in rec.outputs}
        audited = set(self.audited)
        for out in self.audited:
            txn = by_output.get(out)
            if txn is None:
                fail(f"output {out} of no transaction of this run")
            elif self.txns[txn].state in ("aborted", "open"):
                fail(f"output {out} of transaction {txn} ({self.txns[txn].state}: never committed) was delivered")
        for txn, rec in self.txns.items():
            missing = [out for out in rec.outputs if out not in audited]
            if rec.state == "committed" and missing:
                fail(f"transaction {txn} committed but its outputs {missing} were not delivered")
        if self.leftover:
            fail(f"left on the input subscription after the run: {self.leftover}")
        states = Counter(rec.state for rec in self.txns.values())
        self.counters.update({f"transactions {state}": n for state, n in states.items()})

    def outcome(self) -> tuple[str, tuple[str, ...], tuple[tuple[str, int], ...]]:
        """What two runs of one seed must share: the trace, the failures and the counters."""
        return self.world.trace_hash(), tuple(self.failures), tuple(sorted(self.counters.items()))


# -- actors -------------------------------------------------------------------------------------------


class Actor:
    """A simulated client that connects (again after every loss, after a seeded pause) and runs sessions."""

    #: Whether it runs once the workload stopped (the readers at the end).
    after_stop = False

    def __init__(self, scenario: CoreScenario, name: str) -> None:
        self.scenario = scenario
        self.world = scenario.world
        self.name = name
        self.rng = random.Random(f"core-{scenario.seed}-{name}")
        self.done = False

    def run(self) -> Task:
        while not self.done and (self.after_stop or not self.world.stopping):
            client = SimCoreClient(self.world, self.name)
            self.world.actors[self.name] = client
            if (yield client.connected):
                yield from self.session(client)
            if client.alive:
                client.abort(f"{self.name} starts over" if not self.done else f"{self.name} is done")
            if not self.done:
                yield self.world.backoff(self.rng)

    def session(self, client: SimCoreClient) -> Task:
        raise NotImplementedError


class Setup(Actor):
    """Creates both partitioned topics, the audit subscriptions on the output and the workers' on the input."""

    def __init__(self, scenario: CoreScenario) -> None:
        super().__init__(scenario, "setup")

    def session(self, client: SimCoreClient) -> Task:
        o = self.world.options
        for topic in (IN, OUT):
            answer = yield client.request(T.PARTITIONED_METADATA, topic=topic)
            if answer.error is not None:
                return
        subs = [(OUT, "audit", CommandSubscribe.Exclusive), (IN, "ctp", self.scenario.options.sub_type)]
        for topic, sub, sub_type in subs:
            for index in range(o.partitions):
                config = ConsumerConfig(
                    sub, sub_type, initial_position=CommandSubscribe.Earliest, receiver_queue_size=0
                )
                if not (yield client.subscribe(ConsumerCore(partition(topic, index), index, config))):
                    return
        self.done = True


class Source(Actor):
    """Plain messages ``m<n>`` over the input partitions; what is in flight when a connection is lost (a SEND_ERROR
    closes it, as the official clients do), the producer cores send again on the next (deduplicated by the server)."""

    def __init__(self, scenario: CoreScenario) -> None:
        super().__init__(scenario, "src")
        config = ProducerConfig(
            send_timeout_millis=0, batching_enabled=scenario.options.batching, batching_max_messages=4
        )
        self.producers = [
            ProducerCore(partition(IN, i), i, ProducerConfig(**{**_fields(config), "producer_name": f"src-{i}"}), 0.0)
            for i in range(self.world.options.partitions)
        ]
        self.made = 0
        self.unreceipted: set[str] = set()

    def session(self, client: SimCoreClient) -> Task:
        answers = yield gather([client.create_producer(p) for p in self.producers])
        if not all(answers):
            return
        total = self.scenario.options.messages
        while client.alive:
            if self.made >= total:
                if not self.unreceipted:
                    self.done = True
                    return
                yield sleep(self.world.sched, 0.5)
                continue
            for _ in range(self.rng.randint(1, 5)):
                if self.made >= total:
                    break
                key = f"m{self.made}"
                self.made += 1
                self.scenario.sent.add(key)
                self.unreceipted.add(key)
                self._send(client, key)
            yield sleep(self.world.sched, self.rng.uniform(0.0, 0.5))

    def _send(self, client: SimCoreClient, key: str) -> None:
        number = int(key[1:])
        producer = self.producers[number % len(self.producers)]
        message = OutMessage(key.encode(), sequence_id=number)
        client.send(producer, message).then(lambda done: self._receipted(key, done))

    def _receipted(self, key: str, done: Any) -> None:
        if done.error is None:
            self.unreceipted.discard(key)
        else:  # never expected: no send timeout, and a SEND_ERROR makes the core send it again
            self.scenario.counters["source send failed"] += 1


def _fields(config: ProducerConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in ProducerConfig.__dataclass_fields__}


class TxnSource(Actor):
    """Transactions of 1-3 input messages ``t<n>`` over distinct input partitions, committed or aborted."""

    def __init__(self, scenario: CoreScenario) -> None:
        super().__init__(scenario, "txsrc")
        self.producers = [
            ProducerCore(partition(IN, i), i, ProducerConfig(producer_name=f"txsrc-{i}"), 0.0)
            for i in range(self.world.options.partitions)
        ]
        self.made = 0
        self.batches = 0

    def session(self, client: SimCoreClient) -> Task:
        scenario, o = self.scenario, self.world.options
        client.closed.then(lambda error: [client.fail_sends(p, error) for p in self.producers])
        answers = yield gather([client.request(T.TC_CLIENT_CONNECT_REQUEST, tc_id=i) for i in range(o.coordinators)])
        if any(a.error is not None for a in answers) or not all(
            (yield gather([client.create_producer(p) for p in self.producers]))
        ):
            return
        while client.alive:
            if self.batches >= scenario.options.source_txns:
                self.done = True
                return
            self.batches += 1
            answer = yield client.request(T.NEW_TXN, tc_id=self.batches % o.coordinators, txn_ttl_millis=TXN_TIMEOUT_MS)
            if answer.error is not None:
                return
            new = answer.command.newTxnResponse
            txn = TransactionCore(
                TxnId(new.txnid_most_bits, new.txnid_least_bits), TXN_TIMEOUT_MS, self.world.sched.now
            )
            chosen = self.rng.sample(self.producers, self.rng.randint(1, min(3, len(self.producers))))
            keys = [f"t{self.made + i}" for i in range(len(chosen))]
            self.made += len(chosen)
            scenario.never.update(keys)  # until its commit is answered
            registered = yield client.request(
                T.ADD_PARTITION_TO_TXN,
                txnid_most_bits=txn.txn_id.most,
                txnid_least_bits=txn.txn_id.least,
                partitions=[p.topic for p in chosen],
            )
            if registered.error is not None:
                return
            sends = [client.send(p, OutMessage(k.encode(), txn=txn)) for p, k in zip(chosen, keys, strict=True)]
            if any(done.error is not None for done in (yield gather(sends))):
                return
            yield sleep(self.world.sched, self.rng.uniform(0.0, 0.5))
            commit = self.rng.random() >= scenario.options.abort_rate
            txn.begin_end(commit, self.world.sched.now)
            if commit:
                scenario.never.difference_update(keys)
                scenario.maybe.update(keys)
            answer = yield client.request(
                T.END_TXN,
                txnid_most_bits=txn.txn_id.most,
                txnid_least_bits=txn.txn_id.least,
                txn_action=0 if commit else 1,
            )
            txn.ended(commit, answer.error is None)
            if answer.error is not None:
                return
            if commit:
                scenario.maybe.difference_update(keys)
                scenario.sent.update(keys)
            scenario.counters[f"source transactions {'committed' if commit else 'aborted'}"] += 1


class Worker(Actor):
    """Consume-transform-produce in transactions, with the pulsar_txn core's producers and consumers."""

    def __init__(self, scenario: CoreScenario, number: int) -> None:
        super().__init__(scenario, f"w{number}")
        options = scenario.options
        config = ConsumerConfig("ctp", options.sub_type, receiver_queue_size=options.receiver_queue)
        self.consumers = [ConsumerCore(partition(IN, i), i, config) for i in range(self.world.options.partitions)]
        self.wakeup: Future | None = None
        self.stall_rng = random.Random(f"core-{scenario.seed}-{self.name}-stall")
        self.next_tc = number

    def _woken(self, consumer: ConsumerCore) -> None:
        if self.wakeup is not None:
            self.wakeup.resolve(True)

    def _take(self) -> list[tuple[ConsumerCore, ReceivedMessage]]:
        taken = []
        for consumer in self.consumers:
            while len(taken) < self.scenario.options.batch and (message := consumer.take()) is not None:
                taken.append((consumer, message))
                self.scenario.delivered.append(_payload(message))
        return taken

    def session(self, client: SimCoreClient) -> Task:
        world, o = self.world, self.world.options
        client.on_messages = self._woken
        answers = yield gather([client.request(T.TC_CLIENT_CONNECT_REQUEST, tc_id=i) for i in range(o.coordinators)])
        if any(a.error is not None for a in answers):
            return
        config = ProducerConfig(batching_enabled=self.scenario.options.batching, batching_max_messages=4)
        producers = [
            ProducerCore(
                partition(OUT, i), i, ProducerConfig(**{**_fields(config), "producer_name": f"{self.name}-{i}"}), 0.0
            )
            for i in range(o.partitions)
        ]
        # A worker's producers live for one session: what they have in flight when it is lost fails (its
        # transaction is lost with it), where the source's would send it again on the next connection.
        client.closed.then(lambda error: [client.fail_sends(p, error) for p in producers])
        ok = yield gather(
            [client.create_producer(p) for p in producers] + [client.subscribe(c) for c in self.consumers]
        )
        if not all(ok):
            return
        while client.alive and not world.stopping:
            taken = self._take()
            if not taken:
                self.wakeup = Future()
                world.sched.call_later(1.0, self.wakeup.resolve, False)
                client.closed.then(self.wakeup.resolve)
                yield self.wakeup
                self.wakeup = None
                continue
            if not (yield from self._turn(client, producers, taken)):
                return

    def _turn(
        self, client: SimCoreClient, producers: list[ProducerCore], taken: list[tuple[ConsumerCore, ReceivedMessage]]
    ) -> Generator[Future, Any, bool]:
        """One transaction over ``taken``; False when the session must start over."""
        sched, o = self.world.sched, self.world.options
        self.next_tc = (self.next_tc + 1) % o.coordinators
        answer = yield client.request(T.NEW_TXN, tc_id=self.next_tc, txn_ttl_millis=TXN_TIMEOUT_MS)
        if answer.error is not None:
            return False
        new = answer.command.newTxnResponse
        txn = TransactionCore(TxnId(new.txnid_most_bits, new.txnid_least_bits), TXN_TIMEOUT_MS, sched.now)
        if txn.txn_id in self.scenario.txns:
            self.scenario.failures.append(f"transaction id {txn.txn_id} handed out twice")
        rec = self.scenario.txns[txn.txn_id] = TxnOutcome()
        most, least = txn.txn_id
        outs = {_payload(m): sum(m.payload) % len(producers) for _, m in taken}
        registered = yield gather(
            [
                client.request(
                    T.ADD_PARTITION_TO_TXN,
                    txnid_most_bits=most,
                    txnid_least_bits=least,
                    partitions=sorted({producers[i].topic for i in outs.values()}),
                ),
                client.request(
                    T.ADD_SUBSCRIPTION_TO_TXN,
                    txnid_most_bits=most,
                    txnid_least_bits=least,
                    subscription=[
                        {"topic": c.topic, "subscription": "ctp"} for c in {id(c): c for c, _ in taken}.values()
                    ],
                ),
            ]
        )
        if any(r.error is not None for r in registered):
            yield from self._end(client, txn, rec, commit=False)
            return False
        futures = []
        try:
            for key, index in outs.items():
                output = f"{key}|{most},{least}"
                rec.outputs.append(output)
                futures.append(client.send(producers[index], OutMessage(output.encode(), txn=txn)))
                txn.used_by_producer(producers[index])
            for consumer, message in taken:
                futures.append(client.ack_in_txn(consumer, message, txn))
                txn.used_by_consumer(consumer)
        except PulsarException:
            self.scenario.counters["operation refused by the core"] += 1
            yield from self._end(client, txn, rec, commit=False)
            return False
        for producer in producers:
            producer.flush(sched.now)
        client.pump()
        results = yield gather(futures)
        if any(r.error is not None for r in results):
            yield from self._end(client, txn, rec, commit=False)
            return False
        if self.stall_rng.random() < self.scenario.options.stall_rate and not self.world.healed:
            self.scenario.counters["worker stalled past its transaction's timeout"] += 1
            yield sleep(sched, TXN_TIMEOUT_MS / 1000 + self.stall_rng.uniform(0.5, 3.0))
            if not client.alive:
                return False
        commit = self.rng.random() >= self.scenario.options.abort_rate
        return (yield from self._end(client, txn, rec, commit))

    def _end(
        self, client: SimCoreClient, txn: TransactionCore, rec: TxnOutcome, commit: bool
    ) -> Generator[Future, Any, bool]:
        """END_TXN; after an abort, what the consumers had is redelivered (not on Shared, where the broker
        redelivers the aborted acknowledgements itself), as the Java client does. False: start over."""
        if not client.alive:
            return False
        now = self.world.sched.now
        try:
            txn.begin_end(commit, now)
        except PulsarException:
            self.scenario.counters["transaction timed out in the client"] += 1
            commit = False
            txn.begin_end(False, now)
        most, least = txn.txn_id
        answer = yield client.request(
            T.END_TXN, txnid_most_bits=most, txnid_least_bits=least, txn_action=0 if commit else 1
        )
        txn.ended(commit, ok=answer.error is None)
        if answer.error is not None:
            rec.state = "unknown"
            return False
        rec.state = "committed" if commit else "aborted"
        if not commit and self.scenario.options.sub_type != CommandSubscribe.Shared:
            for consumer in txn.ack_consumers:
                consumer.redeliver_all()
            client.pump()
        return True


class Reader(Actor):
    """Reads a subscription on every partition of a topic into ``inbox`` (the audit, the leftover check)."""

    after_stop = True

    def __init__(self, scenario: CoreScenario, sub: str, topic: str, inbox: list[str]) -> None:
        super().__init__(scenario, f"read-{sub}")
        self.sub = sub
        self.topic = topic
        self.inbox = inbox

    def session(self, client: SimCoreClient) -> Task:
        o, options = self.world.options, self.scenario.options
        sub_type = CommandSubscribe.Exclusive if self.sub == "audit" else options.sub_type
        consumers = [
            ConsumerCore(partition(self.topic, i), i, ConsumerConfig(self.sub, sub_type)) for i in range(o.partitions)
        ]
        client.on_messages = lambda consumer: self._drain(consumer)
        if not all((yield gather([client.subscribe(c) for c in consumers]))):
            return
        yield client.closed

    def _drain(self, consumer: ConsumerCore) -> None:
        while (message := consumer.take()) is not None:
            self.inbox.append(_payload(message))
            consumer.ack_message(message, self.world.sched.now)


def main(argv: list[str]) -> int:
    first, last = (int(argv[0]), int(argv[-1])) if argv else (1, 20)
    failed = 0
    for seed in range(first, last + 1):
        run = CoreScenario(seed).run()
        counters = " ".join(f"{k}={v}" for k, v in sorted(run.counters.items()))
        print(f"seed {seed}: {'FAILED' if run.failures else 'ok'} {counters}", flush=True)
        for failure in run.failures:
            print(f"  {failure}")
        failed += bool(run.failures)
    print(f"{last - first + 1} seeds, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
