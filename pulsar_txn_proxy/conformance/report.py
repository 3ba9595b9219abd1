"""What a conformance run found: the terminal table, report.json, junit.xml, report.html and recorded goldens."""

from __future__ import annotations

import datetime
import html
import importlib.metadata
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from pulsar_txn_proxy.conformance import security
from pulsar_txn_proxy.conformance.framework import Target
from pulsar_txn_proxy.conformance.runner import OUTCOMES, Capability, Reference, Result

#: The clients' versions, as the harnesses pin them (tests/java/pom.xml, tests/go/go.mod).
JAVA_CLIENT = "org.apache.pulsar:pulsar-client 4.2.4"
GO_CLIENT = "github.com/apache/pulsar-client-go v0.19.0"


@dataclass
class Summary:
    """Everything a report shows."""

    target: Target
    reference: Reference
    capabilities: dict[str, Capability]
    notes: list[str]
    results: list[Result]
    seconds: float
    python_seconds: float
    client_versions: dict[str, str]

    def counts(self, area: str | None = None) -> dict[str, int]:
        chosen = [r for r in self.results if area is None or r.entry.area == area]
        return {outcome: sum(r.outcome == outcome for r in chosen) for outcome in OUTCOMES}

    def areas(self) -> list[str]:
        return list(dict.fromkeys(r.entry.area for r in self.results))


def client_versions(clients: set[str]) -> dict[str, str]:
    versions = {}
    if "python" in clients:
        try:
            versions["python"] = f"pulsar-client {importlib.metadata.version('pulsar-client')}"
        except importlib.metadata.PackageNotFoundError:
            versions["python"] = "pulsar-client (version unknown)"
    if "java" in clients:
        versions["java"] = JAVA_CLIENT
    if "go" in clients:
        versions["go"] = GO_CLIENT
    return versions


def _score(counts: dict[str, int]) -> str:
    ran = counts["pass"] + counts["differs"] + counts["error"]
    return f"{100 * counts['pass'] / ran:.0f}%" if ran else "-"


def table(summary: Summary) -> str:
    """The per-area table, the scenarios that differ or failed, and the run time."""
    header = ("area", *OUTCOMES, "score")
    rows = [(area, *map(str, summary.counts(area).values()), _score(summary.counts(area))) for area in summary.areas()]
    total = summary.counts()
    rows.append(("total", *map(str, total.values()), _score(total)))
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def line(row: tuple[str, ...]) -> str:
        return "  ".join(cell.ljust(widths[0]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row))

    out = [
        f"conformance of {summary.target.service_url} against {summary.reference.name}",
        "",
        line(header),
        "  ".join("-" * w for w in widths),
        *map(line, rows[:-1]),
        "  ".join("-" * w for w in widths),
        line(rows[-1]),
    ]
    bad = [r for r in summary.results if r.outcome in ("differs", "error")]
    if bad:
        out += ["", "differs / error:"]
        for r in bad:
            out.append(f"  {r.entry.id}: {r.outcome}: {r.reason}")
            for row in r.differences[:5]:
                out.append(
                    f"      {row['observation']}: Pulsar {_short(row['reference'])}, broker {_short(row['broker'])}"
                )
            if len(r.differences) > 5:
                out.append(f"      ... {len(r.differences) - 5} more (see the report)")
    out += [
        "",
        f"time: {_duration(summary.seconds)} in all, of which the Python-client scenarios "
        f"{_duration(summary.python_seconds)}",
    ]
    return "\n".join(out)


def _duration(seconds: float) -> str:
    minutes, rest = divmod(int(seconds + 0.5), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{seconds:.1f}s"


def _short(value: Any, width: int = 60) -> str:
    text = value if value == "(absent)" else json.dumps(value, sort_keys=True)
    return text if len(text) <= width else text[: width - 1] + "…"


# -- files --------------------------------------------------------------------------------------------------


def as_json(summary: Summary) -> dict[str, Any]:
    return {
        "target": {
            "service_url": summary.target.service_url,
            "admin_url": summary.target.admin_url,
            "security": security.for_url(summary.target.service_url).describe(),
        },
        "reference": {"name": summary.reference.name, "pulsar_version": summary.reference.version},
        "golden_pulsar_version": summary.reference.version,
        "client_versions": summary.client_versions,
        "capabilities": {k: {"available": v.available, "detail": v.detail} for k, v in summary.capabilities.items()},
        "notes": summary.notes,
        "generated": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "seconds": round(summary.seconds, 1),
        "python_client_seconds": round(summary.python_seconds, 1),
        "totals": summary.counts(),
        "areas": {area: summary.counts(area) for area in summary.areas()},
        "scenarios": [
            {
                "id": r.entry.id,
                "area": r.entry.area,
                "clients": list(r.entry.clients),
                "needs": list(r.entry.needs),
                "outcome": r.outcome,
                "reason": r.reason,
                "differences": r.differences,
                "seconds": round(r.seconds, 2),
                "reference": r.entry.reference,
            }
            for r in summary.results
        ],
    }


def junit(summary: Summary) -> bytes:
    """One testcase per scenario that ran (unsupported and not-run ones are skipped testcases)."""
    suite = ElementTree.Element(
        "testsuite",
        name="pulsar-conformance",
        tests=str(len(summary.results)),
        failures=str(summary.counts()["differs"]),
        errors=str(summary.counts()["error"]),
        skipped=str(summary.counts()["unsupported"] + summary.counts()["not-run"]),
        time=f"{summary.seconds:.1f}",
    )
    for r in summary.results:
        case = ElementTree.SubElement(
            suite, "testcase", classname=f"conformance.{r.entry.area}", name=r.entry.id, time=f"{r.seconds:.2f}"
        )
        if r.outcome == "differs":
            text = "\n".join(
                f"{d['observation']}: Pulsar {_short(d['reference'], 400)} | broker {_short(d['broker'], 400)}"
                for d in r.differences
            )
            ElementTree.SubElement(case, "failure", message=r.reason, type="differs").text = text
        elif r.outcome == "error":
            ElementTree.SubElement(case, "error", message=r.reason, type="error").text = r.details or r.reason
        elif r.outcome in ("unsupported", "not-run"):
            ElementTree.SubElement(case, "skipped", message=f"{r.outcome}: {r.reason}")
    return ElementTree.tostring(suite, encoding="utf-8", xml_declaration=True)


_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}th{background:#f3f3f3}
td.n{text-align:right}.pass{color:#176f2c}.differs,.error{color:#b00020;font-weight:bold}
.unsupported,.not-run{color:#777}code,pre{font:12px ui-monospace,monospace;white-space:pre-wrap}
pre{background:#f7f7f7;padding:6px;max-height:20em;overflow:auto}
"""


def page(summary: Summary) -> str:
    """A self-contained HTML page: the score per area, then each differing or failed scenario."""
    e = html.escape
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>Pulsar conformance of "
        f"{e(summary.target.service_url)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>Pulsar conformance of <code>{e(summary.target.service_url)}</code></h1>",
        f"<p>Compared with {e(summary.reference.name)} (Pulsar {e(summary.reference.version)}); clients: "
        f"{e(', '.join(summary.client_versions.values()))}; {_duration(summary.seconds)}.</p>",
        "<h2>Score per area</h2><table><tr><th>area</th>",
        *(f"<th>{o}</th>" for o in OUTCOMES),
        "<th>score</th></tr>",
    ]
    for area in [*summary.areas(), None]:
        counts = summary.counts(area)
        label = area or "<b>total</b>"
        parts.append(
            f"<tr><td>{label if area is None else e(label)}</td>"
            + "".join(f"<td class='n'>{counts[o]}</td>" for o in OUTCOMES)
            + f"<td class='n'>{_score(counts)}</td></tr>"
        )
    parts.append("</table><h2>What the broker offers</h2><table><tr><th>need</th><th>found</th><th>how</th></tr>")
    for need, cap in summary.capabilities.items():
        parts.append(f"<tr><td>{need}</td><td>{'yes' if cap.available else 'no'}</td><td>{e(cap.detail)}</td></tr>")
    parts.append("</table>")
    if summary.notes:
        parts.append("<ul>" + "".join(f"<li>{e(n)}</li>" for n in summary.notes) + "</ul>")
    bad = [r for r in summary.results if r.outcome in ("differs", "error")]
    parts.append(f"<h2>Scenarios that differ or failed ({len(bad)})</h2>")
    for r in bad:
        parts.append(
            f"<h3 id='{e(r.entry.id)}'>{e(r.entry.id)} <span class='{r.outcome}'>{r.outcome}</span></h3>"
            f"<p>{e(r.entry.summary)} <a href='{e(r.entry.reference)}'>Pulsar documentation</a></p>"
            f"<p>{e(r.reason)}</p>"
        )
        if r.differences:
            parts.append("<table><tr><th>observation</th><th>Apache Pulsar</th><th>this broker</th></tr>")
            for d in r.differences:
                parts.append(
                    f"<tr><td><code>{e(d['observation'])}</code></td>"
                    f"<td><code>{e(_short(d['reference'], 400))}</code></td>"
                    f"<td><code>{e(_short(d['broker'], 400))}</code></td></tr>"
                )
            parts.append("</table>")
        if r.details:
            parts.append(f"<details><summary>output</summary><pre>{e(r.details)}</pre></details>")
    parts.append("<h2>Every scenario</h2><table><tr><th>id</th><th>outcome</th><th>needs</th><th>reason</th></tr>")
    for r in summary.results:
        parts.append(
            f"<tr><td>{e(r.entry.id)}</td><td class='{r.outcome}'>{r.outcome}</td>"
            f"<td>{e(', '.join(r.entry.needs))}</td><td>{e(r.reason)}</td></tr>"
        )
    parts.append("</table></body></html>\n")
    return "".join(parts)


def write(directory: Path, summary: Summary) -> list[Path]:
    """report.json, junit.xml and report.html in ``directory``; their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / "report.json", directory / "junit.xml", directory / "report.html"]
    paths[0].write_text(json.dumps(as_json(summary), indent=1) + "\n")
    paths[1].write_bytes(junit(summary))
    paths[2].write_text(page(summary))
    return paths


def write_goldens(directory: Path, summary: Summary, version: str) -> int:
    """The outcomes of the scenarios that ran, as golden files (``<module>.json``) of ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    by_module: dict[str, dict[str, Any]] = {}
    for r in summary.results:
        if r.reason == "recorded":
            by_module.setdefault(r.entry.module, {})[r.entry.name] = r.observed
    for module, outcomes in by_module.items():
        path = directory / f"{module}.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        data.update(outcomes)
        data["_meta"] = {
            "recorded_from": summary.target.service_url,
            "pulsar_version": re.sub(r"\s+", " ", version).strip(),
        }
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return sum(len(v) for v in by_module.values())
