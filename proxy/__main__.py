"""``python -m proxy`` runs the command line."""

import sys

from proxy.cli import main

sys.exit(main())
