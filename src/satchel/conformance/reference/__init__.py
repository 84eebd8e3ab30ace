"""The reference integration: a minimal agent loop with no framework, over the shared turn policy.

Unchanged it passes every conformance case; each switch in `satchel.conformance.reference.breaks`
breaks exactly one rule, so the suite can be shown to catch it. `python -m
satchel.conformance.reference [--break NAME]` is its driver; `--list-breaks` prints every switch
and the rule it breaks.
"""
