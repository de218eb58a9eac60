"""``python -m clrlayout.fleet PATH --memory BYTES``: one dump's analysis in a process of its own (the child that
:func:`clrlayout.fleet.worker.run_isolated` starts)."""

import sys

from .worker import main

sys.exit(main())
