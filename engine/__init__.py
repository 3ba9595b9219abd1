"""The broker's core: storage, topics, subscriptions, dispatch and (later) transactions. No I/O framework."""
