"""Jobs submitted to a Spark cluster with ``spark-submit`` (see :mod:`spark.cluster`)."""
