"""The object graph: references from the GC's own descriptions (``gcdesc``), the whole heap as a graph
(``build``), its roots (``handles``, ``roots``), reachability (``reach``), dominators and retained sizes
(``dominators``), and the questions a leak hunt asks of them (``objectgraph``)."""
