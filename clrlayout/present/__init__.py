"""Presenters: pure functions from the model to text (tables, hex views, JSON).  No I/O here."""
