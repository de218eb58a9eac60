"""Tier 1: no dump at all: data files, synthetic heaps and dumps, the code's own structure (marker ``unit``)."""
