"""What every provider family shares: SDK clients and calls, error mapping, request settings,
the state-handling protocol, the assembly of a turn's result, and the adapter spec."""
