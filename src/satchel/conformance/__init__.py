"""The conformance suite: cases, runner, fault proxy, judge and the reference integration."""
