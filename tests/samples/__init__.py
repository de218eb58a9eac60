"""Tier 2: the committed sample dumps of sample_dumps/ and tests/data (marker ``samples``)."""
