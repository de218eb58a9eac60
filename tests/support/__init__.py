"""What the tests share: the samples and their truth, synthetic heaps and dumps, fresh dumps of real
processes and the DAC that checks them, and the repository's scripts (sample_dumps/, fuzz/) as modules."""
