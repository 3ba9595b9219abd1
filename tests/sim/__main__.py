"""``python -m tests.sim``: see :mod:`tests.sim.campaign`."""

from tests.sim.campaign import main

raise SystemExit(main())
