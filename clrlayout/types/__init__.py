"""The type system: managed images and their metadata, and the names of MethodTables."""
