"""The conformance suite's pytest side (see README.md); the scenario catalogue itself is ``pulsar_txn_proxy.conformance``."""
