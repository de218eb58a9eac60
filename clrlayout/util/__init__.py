"""Helpers with no knowledge of .NET: numpy array helpers, address ranges, bit readers, the allocator."""
