"""The memory deployment's use cases: one function per v1 operation, each owning its transaction,
locks, idempotency and rules, raising `satchel.memory.domain` refusals. Imports store and domain,
never api."""
