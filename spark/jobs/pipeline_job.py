"""The demo pipeline as a driver script for ``spark-submit`` (its folder holds nothing else, as Spark puts a
script's folder first on the driver's ``sys.path``)::

    spark-submit --master spark://host:7077 --py-files pulsar-txn-proxy-py.zip spark/jobs/pipeline_job.py \\
        --service-url pulsar://endpoint:6650 --master spark://host:7077
"""

from __future__ import annotations

import argparse
import sys

from spark.pipeline import run_demo


def main() -> int:
    parser = argparse.ArgumentParser(description="the demo pipeline on a Spark cluster")
    parser.add_argument("--service-url", required=True, help="the endpoint (pulsar://host:port)")
    parser.add_argument("--master", required=True, help="the cluster (spark://host:port), as given to spark-submit")
    parser.add_argument("--events", type=int, default=500, help="events per source topic")
    args = parser.parse_args()
    return run_demo(args.events, service_url=args.service_url, master=args.master)


if __name__ == "__main__":
    sys.exit(main())
