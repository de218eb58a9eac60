"""Several processes walk one heap and share the work, with the serial result byte for byte.

The heap walk is a chain, but it goes window by window, and windows have fixed bounds
(``fastwalk.HeapSteps``).  A window can also be walked from a *guess* of where the chain enters it (the end
of a short walk just before it), so it can be walked before the chain gets there.  So after the dump is
opened the process forks children (``--jobs N``: N - 1 of them), and all of them claim the windows that hold
dump memory in a shared table, each the next free ones (BLOCK at a time), and walk and format them side by
side: the children from guesses, the parent from the real cursor when the chain reaches a free window, and
from guesses while it waits for a child.  A window right after one the same process walked starts where
that walk ended, not from a guess (a guess costs a short walk of its own).

The parent follows the real chain window by window.  A window whose walk started where the real cursor
enters it is taken as it is: a step depends only on its cursor.  Any other (a wrong guess, which is rare, a
window the chain enters in a way that no guess foresaw, or one two processes claimed at once) the parent
walks again from the real cursor, or takes its own walk of it.  What is taken is written in heap order:
the child that walked a window writes its output when the parent gives it the turn, or drops it when told
to.  Totals, findings and whatever else a command collects come to the parent with each window and are
merged in heap order.

If a child goes away (it is killed, or it fails), the parent walks its windows itself, so the output stays
whole.  A parent that goes away takes the children with it (their pipes close).
"""

from .steps import MAX_JOBS, MIN_HEAP_BYTES, StepOutput, can_share, run_steps, write_out

__all__ = ["MAX_JOBS", "MIN_HEAP_BYTES", "StepOutput", "can_share", "run_steps", "write_out"]
