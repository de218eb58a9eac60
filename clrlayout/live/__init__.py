"""Live verification: a real runtime hosted in this process (pythonnet), its strings checked against the
decoders and profiles, and a dump of this process checked the same way."""
