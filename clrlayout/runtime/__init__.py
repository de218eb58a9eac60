"""Which runtime a dump holds and its layouts: detection, the profiles of formats/, the construct structs,
MethodTables, the contract descriptor, the loader heaps."""
