"""The import graph of the source packages has no circle and no upward edge (issue 30, ADR 0008).

The graph is built from the source with :mod:`ast`, not by importing it, so it sees every import: module level,
inside functions and under ``if TYPE_CHECKING:`` (a lower layer that names a higher layer's type still depends on
it). ``from package import name`` is an edge to the submodule ``package.name`` when there is one, else to the
package's ``__init__``; an import of a module is also an edge to the ``__init__`` of each package above it (they run
first), except the importer's own packages (loaded already: a submodule importing a sibling does not depend on the
``__init__`` that re-exports both). Each module belongs to exactly one layer of :data:`LAYERS`; it may import its
own layer and the layers before it.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("wire", "engine", "proxy", "spark", "pulsar_txn", "pulsar_txn_proxy")

#: The layers, lowest first: ``(name, modules)``. A module is named exactly, or ``package.*`` for a package and
#: everything under it. A module matches the most specific entry; a module no entry matches fails the test, so a
#: new module must be given a place here.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("wire: protocol, sans-I/O", ("wire", "wire.*")),
    # -- engine/, lowest first: issue 30's order --
    (
        "engine values: names, errors, ids, entries, time, limits, ledger spans, subscription types, schema rules",
        (
            "engine",
            "engine.errors",
            "engine.names",
            "engine.clock",
            "engine.deadlines",
            "engine.transactions",
            "engine.entry",
            "engine.limits",
            "engine.ledgers",
            "engine.subscription_types",
            "engine.avro_compat",
            "engine.schema_compat",
        ),
    ),
    ("engine store", ("engine.store", "engine.storage")),
    ("engine topic and cursor", ("engine.topic", "engine.cursor", "engine.entry_cache")),
    ("engine subscription and dispatch", ("engine.subscription", "engine.non_persistent")),
    (
        "engine transaction buffer, pending ack and compaction",
        ("engine.txn_buffer", "engine.pending_ack", "engine.compaction"),
    ),
    ("engine coordinator", ("engine.coordinator",)),
    (
        "engine namespaces and policies",
        (
            "engine.namespaces",
            "engine.backlog_quota",
            "engine.schemas",
            "engine.authorization",
            "engine.stats",
            "engine.topic_list",
        ),
    ),
    ("engine Broker facade", ("engine.broker",)),
    ("engine services driving the facade: the policy enforcer", ("engine.policy_enforcer",)),
    # -- proxy/, lowest first --
    (
        "proxy foundations: settings, authentication, TLS, commits, transports",
        (
            "proxy",
            "proxy.config",
            "proxy.listeners",
            "proxy.authentication",
            "proxy.tls",
            "proxy.commits",
            "proxy.data_lock",
            "proxy.listen",
            "proxy.reactor",
            "proxy.transport",
        ),
    ),
    ("proxy Pulsar's stats JSON, shared by both protocols", ("proxy.stats_json",)),
    ("proxy command groups", ("proxy.transactions", "proxy.topic_lists")),
    ("proxy connection", ("proxy.connection",)),
    ("proxy server", ("proxy.server",)),
    ("proxy admin HTTP core", ("proxy.admin.http", "proxy.admin.exposition")),
    ("proxy admin authentication", ("proxy.admin.auth",)),
    ("proxy admin routes", ("proxy.admin.*",)),
    ("proxy admin site", ("proxy.admin",)),
    ("proxy wiring and run", ("proxy.wiring", "proxy.run")),
    # -- clients and products --
    ("pulsar_txn: the Python transaction client", ("pulsar_txn", "pulsar_txn.*")),
    ("spark: the connector", ("spark", "spark.*")),
    ("pulsar_txn_proxy: pytest plugin, testcontainers, conformance", ("pulsar_txn_proxy", "pulsar_txn_proxy.*")),
    ("entry points: the command line", ("proxy.cli", "proxy.__main__")),
)

#: What each client package may import besides itself: a client speaks the protocol, it never reaches the server.
CLIENT_REACH = {"spark": {"wire", "pulsar_txn"}, "pulsar_txn": {"wire"}}


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool


def _modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            name = ".".join(parts)
            found[name] = Module(name, path, is_package)
    return found


def _imported(source: str, package: str, modules: dict[str, Module]) -> Iterator[tuple[str, int]]:
    """The project modules a module's ``source`` imports, with the line of each import (``package``: the package
    its relative imports start from)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    for found in _with_parents(alias.name, package, modules):
                        yield found, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:
                submodule = f"{origin}.{alias.name}"
                target = submodule if submodule in modules else origin
                if target in modules:
                    for found in _with_parents(target, package, modules):
                        yield found, node.lineno


@functools.cache
def _graph() -> tuple[dict[str, Module], dict[str, dict[str, int]]]:
    """Every module, and for each the modules it imports with the line of the first such import (read once)."""
    modules = _modules()
    graph: dict[str, dict[str, int]] = {}
    for name, module in modules.items():
        edges: dict[str, int] = {}
        package = name if module.is_package else name.rpartition(".")[0]
        for target, line in _imported(module.path.read_text(), package, modules):
            if target != name:
                edges.setdefault(target, line)
        graph[name] = edges
    return modules, graph


def _with_parents(target: str, package: str, modules: dict[str, Module]) -> Iterator[str]:
    """``target`` and the packages whose ``__init__`` importing it runs first: those above it that are not also
    above the importer (whose own packages are loaded already, and only re-export)."""
    yield target
    parts = target.split(".")
    for depth in range(1, len(parts)):
        parent = ".".join(parts[:depth])
        if parent in modules and not (package == parent or package.startswith(parent + ".")):
            yield parent


def layer_of(name: str) -> int | None:
    """The index in :data:`LAYERS` of a module's layer (the most specific entry that names it), else None."""
    best: tuple[int, int] | None = None  # (specificity, layer)
    for index, (_, patterns) in enumerate(LAYERS):
        for pattern in patterns:
            if pattern == name:
                specificity = 1000
            elif pattern.endswith(".*") and name.startswith(pattern[:-1]):
                specificity = pattern.count(".")
            else:
                continue
            if best is None or specificity > best[0]:
                best = (specificity, index)
    return None if best is None else best[1]


def find_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One circle through each strongly connected component of more than one module, as a path back to its start
    (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return [_circle(graph, component) for component in components]


def _describe(graph: dict[str, dict[str, int]], cycle: list[str]) -> str:
    members = {m for m in graph if m in _component_of(graph, cycle[0])}
    return " -> ".join(cycle) + f"  (one circle of {len(members)} modules: {', '.join(sorted(members))})"


def _component_of(graph: dict[str, dict[str, int]], start: str) -> set[str]:
    """The modules reachable from ``start`` that reach it back."""

    def reach(edges: dict[str, set[str]]) -> set[str]:
        seen, todo = {start}, [start]
        while todo:
            for child in edges[todo.pop()]:
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
        return seen

    forward = {node: set(children) for node, children in graph.items()}
    backward: dict[str, set[str]] = {node: set() for node in graph}
    for node, children in graph.items():
        for child in children:
            backward[child].add(node)
    return reach(forward) & reach(backward)


def _circle(graph: dict[str, dict[str, int]], component: set[str]) -> list[str]:
    """A shortest circle inside a strongly connected component, from its first module back to it."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child not in component:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in parents:
                    parents[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no circle in {sorted(component)}")


def test_every_module_has_a_layer() -> None:
    modules, _ = _graph()
    unplaced = sorted(name for name in modules if layer_of(name) is None)
    assert not unplaced, f"modules with no layer in LAYERS: {unplaced}"
    named = [p for _, patterns in LAYERS for p in patterns]
    stale = [p for p in named if p.removesuffix(".*") not in modules]
    assert not stale, f"LAYERS names modules that do not exist: {stale}"
    assert len(named) == len(set(named)), "a module is named in two layers"


def test_no_import_circle() -> None:
    _, graph = _graph()
    cycles = find_cycles(graph)
    assert not cycles, "import circles:\n" + "\n".join(_describe(graph, cycle) for cycle in cycles)


def test_no_upward_import() -> None:
    modules, graph = _graph()
    upward = []
    for name, edges in sorted(graph.items()):
        mine = layer_of(name)
        for target, line in sorted(edges.items()):
            theirs = layer_of(target)
            if mine is not None and theirs is not None and theirs > mine:
                where = modules[name].path.relative_to(ROOT)
                upward.append(f"{where}:{line}: {name} ({LAYERS[mine][0]}) imports {target} ({LAYERS[theirs][0]})")
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_no_import_of_the_own_package_init() -> None:
    """A submodule takes names from their modules, not from its package's ``__init__`` (which re-exports them, and
    so may import the submodule)."""
    modules, graph = _graph()
    found = []
    for name, edges in sorted(graph.items()):
        for target, line in sorted(edges.items()):
            if modules[target].is_package and name.startswith(target + ".") and not modules[name].is_package:
                found.append(f"{modules[name].path.relative_to(ROOT)}:{line}: {name} imports {target}")
    assert not found, "imports of the own package's __init__:\n" + "\n".join(found)


def test_clients_reach_only_the_protocol() -> None:
    _, graph = _graph()
    found = []
    for name, edges in sorted(graph.items()):
        package = name.split(".")[0]
        allowed = CLIENT_REACH.get(package)
        if allowed is None:
            continue
        found += [f"{name} imports {t}" for t in sorted(edges) if t.split(".")[0] not in allowed | {package}]
    assert not found, "clients reaching past the protocol:\n" + "\n".join(found)


def test_the_checks_see_circles_and_upward_edges() -> None:
    """The checks themselves: a circle through an import under TYPE_CHECKING or inside a function is found."""
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert layer_of("engine.topic") < layer_of("engine.broker") < layer_of("proxy.connection")  # type: ignore[operator]
    assert layer_of("proxy.admin.topics") == layer_of("proxy.admin.metrics") != layer_of("proxy.admin")
    source = "if TYPE_CHECKING:\n    from wire import framing\ndef f():\n    import wire.batch\n    from . import x\n"
    found = sorted(target for target, _ in _imported(source, "wire", _modules()))
    assert found == ["wire", "wire.batch", "wire.framing"]  # no wire.x: x is a name of wire's __init__
    proxy_admin = sorted(target for target, _ in _imported("from proxy.admin.http import Reply\n", "proxy", _modules()))
    assert proxy_admin == ["proxy.admin", "proxy.admin.http"]  # importing a submodule runs its package's __init__
