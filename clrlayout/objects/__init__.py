"""What the objects are: the sync block word, strings one at a time and in batches, and the JOL-style rows of
an object of any type."""
