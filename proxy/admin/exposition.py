"""The Prometheus text format of the per-topic and per-subscription metric families, written directly.

``prometheus_client``'s writer validates and escapes every label name and value of every sample again, about 13 µs
a sample: 180 ms for the 14,000 samples of 1,000 topics. Here each row's label set is escaped once and shared by
its families, and a finite number under a million is written with ``repr`` (what ``floatToGoString`` returns for
it), so the same text takes a few milliseconds. Pulsar writes its topic-level metrics with a writer of its own
for the same reason. The low-cardinality families still go through ``prometheus_client``.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.utils import floatToGoString

#: One row: its label values (in the order of the label names given with it) and its figures.
Row = tuple[Sequence[str], Sequence[float]]


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def label_sets(names: Sequence[str], rows: Sequence[Row]) -> list[str]:
    """Each row's ``{name="value",...}``, with the names sorted as ``prometheus_client`` writes them."""
    order = sorted(range(len(names)), key=lambda i: names[i])
    return ["{" + ",".join(f'{names[i]}="{_escape(values[i])}"' for i in order) + "}" for values, _ in rows]


def number(value: float) -> str:
    """A sample value as ``prometheus_client`` writes it (Go's float format)."""
    as_float = float(value)
    if -1e6 < as_float < 1e6:
        return repr(as_float)
    return floatToGoString(as_float)


def families(specs: Sequence[tuple[str, str, str]], names: Sequence[str], rows: Sequence[Row]) -> str:
    """The text of one family per ``(name, kind, help)`` of ``specs``: the i-th takes each row's i-th figure.

    A counter's samples and help carry the ``_total`` suffix its name already has, as for ``CounterMetricFamily``.
    """
    labels = label_sets(names, rows)
    out: list[str] = []
    for index, (name, kind, doc) in enumerate(specs):
        help_text = doc.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")
        out.extend(
            f"{name}{label} {number(figures[index])}\n" for label, (_, figures) in zip(labels, rows, strict=True)
        )
    return "".join(out)
