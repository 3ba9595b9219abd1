"""The products of the ``pulsar-txn-proxy`` distribution that users import or run by name.

The server itself lives in the design card's folders (``wire``, ``engine``, ``proxy``, ``spark``); this package holds
what a user's own code reaches for: the pytest plugin and testcontainers class for their test suites, and the
conformance command they point at a Pulsar-compatible broker.
"""
