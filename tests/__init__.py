"""clrlayout's tests, in three tiers: unit (no dump), samples (the committed dumps), oracle (real runtimes)."""
