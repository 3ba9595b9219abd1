"""The subscription model test (tests/subscription_model.py) with a small budget; ``make model`` runs it for long.

Failures are not shrunk here (that can take minutes): the failure's note lists the steps, and ``make model`` shrinks.
Failing examples are kept in ``.hypothesis/model`` and tried first on the next run.
``MODEL_SERVICE_URL=pulsar://host:port`` runs it against another broker (the reference Pulsar) without restarts.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests.subscription_model import ROOT_DATABASE, SubscriptionMachine

TestSubscriptionModel = SubscriptionMachine.TestCase
TestSubscriptionModel.settings = settings(
    max_examples=25,
    stateful_step_count=15,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    database=DirectoryBasedExampleDatabase(ROOT_DATABASE),
    suppress_health_check=[HealthCheck.too_slow],
)
