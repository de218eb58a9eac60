"""clrlayout: how .NET objects sit in memory, byte by byte, read from crash dumps without the DAC."""

__version__ = "0.1.0"
