"""The conformance suite: scenarios that tell how Pulsar-equal a broker is, and the ``conformance`` command.

``catalogue`` lists the scenarios (``scenarios/``, written with ``framework``), ``golden/`` holds what Apache Pulsar
4.2.4 did in each, ``harness`` builds and runs the Java and Go client harnesses, ``runner`` probes a broker, runs the
selected scenarios and classifies each outcome, ``report`` writes report.json, junit.xml and report.html, and
``command`` is ``pulsar-txn-proxy conformance list|run|record``.
"""
