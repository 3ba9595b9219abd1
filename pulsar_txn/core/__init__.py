"""The sans-I/O core of :mod:`pulsar_txn`: state machines for a broker connection, producers, consumers and
transactions. No sockets, no threads, no clocks: bytes go in with :meth:`Connection.handle_bytes`, bytes to send come
out of :meth:`Connection.poll_transmit`, what a user should see comes out of :meth:`Connection.poll_event`, and time is
passed in (``now``, seconds of any monotonic clock) with :meth:`Connection.poll_timeout` /
:meth:`Connection.handle_timeout` driving the timers. The blocking client (:mod:`pulsar_txn`) and the asyncio client
(:mod:`pulsar_txn.asyncio`) are thin shells around it; tests drive it directly with simulated time."""
