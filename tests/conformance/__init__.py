"""The conformance suite's pytest side (see README.md); the catalogue itself is ``pulsar_txn_proxy.conformance``.

Modules here written before the catalogue moved into the package import ``tests.conformance.framework`` and the
helpers of scenario modules as ``tests.conformance.test_<area>``; those names resolve to the package's modules.
"""

import importlib
import sys

from pulsar_txn_proxy.conformance import catalogue, framework, harness_observations

sys.modules[f"{__name__}.framework"] = framework
sys.modules[f"{__name__}.harness_observations"] = harness_observations
for _area in catalogue.AREAS:
    sys.modules[f"{__name__}.test_{_area.module}"] = importlib.import_module(
        f"pulsar_txn_proxy.conformance.scenarios.{_area.module}"
    )
