"""Questions over the whole heap: filters, statistics and duplicates, statistics by type, where the memory
went, layouts without a dump."""
