"""The conformance suite's pytest side (see README.md); the catalogue is ``pulsar_txn_proxy.conformance``."""
