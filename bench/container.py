"""Container start-up: from starting the endpoint's container to the first CONNECT answered through its port.

Uses the image and the start path of the container tests (``tests/container_endpoint.py``). Needs a container
engine: run it as ``compose/with-engine.sh .venv/bin/python bench/container.py`` (``make bench-container``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.container_endpoint import ContainerServer, endpoint_image, require_engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=5, help="container starts to measure")
    args = parser.parse_args()
    require_engine()
    image = endpoint_image()
    seconds = []
    for _ in range(args.starts):
        server = ContainerServer(image, "--log-level", "WARNING").start()
        seconds.append(server.startup_seconds)
        server.stop()
        server.remove_volume()
    print(f"container start to first CONNECT answered: median {statistics.median(seconds):.2f} s, "
          f"min {min(seconds):.2f} s, max {max(seconds):.2f} s ({args.starts} starts)")


if __name__ == "__main__":
    main()
