"""The catalogue's scenarios (``pulsar_txn_proxy.conformance.scenarios``) as pytest tests, one per scenario id.

They run on the target chosen by this directory's ``conftest.py`` (this endpoint against the golden files by
default) and fail on any difference; ``-k core.`` or ``-k transactions.abort`` selects by id. Scenarios that need
``auth`` or ``tls`` run on the secured targets (this endpoint, or a Pulsar standalone, with TLS and a token). The
``pulsar-txn-proxy conformance`` command runs the same catalogue against a broker at a URL.
"""

from __future__ import annotations

import pytest

from pulsar_txn_proxy.conformance.catalogue import Entry, load

CATALOGUE = load()


@pytest.mark.parametrize("entry", CATALOGUE, ids=[entry.id for entry in CATALOGUE])
def test_scenario(conformance, entry: Entry) -> None:
    conformance.check(entry.fn, secured=bool({"auth", "tls"} & set(entry.needs)))
