"""Tier 3: real runtimes: fresh dumps, the runtime's own DAC, a hosted CLR, reflection targets (marker ``oracle``)."""
