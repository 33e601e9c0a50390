"""How a fork of the suite's servers (snakemake_fork_server.py, job_forks.py) ends the program it runs: as the
interpreter ends it, bar the teardown of every module."""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import NoReturn


def exit_status(main: Callable[[], object]) -> int:
    """``main()``'s exit status as the interpreter gives a program's: SystemExit's code, 1 and the traceback for an
    exception, the end by SIGINT for a KeyboardInterrupt."""
    try:
        main()
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # ended by the signal, as the interpreter ends then
        os.kill(os.getpid(), signal.SIGINT)
        return 128 + signal.SIGINT  # what a shell reports, were the signal blocked
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1
    return 0


def finish(status: int) -> NoReturn:
    """Exit as the interpreter does up to its teardown of every module: threading's own shutdown (its exit hooks, which
    tell idle thread pools to stop, then every non-daemon thread joined: Thread.join alone waits forever on a pool's
    idle worker), atexit handlers (logging's, the SLURM plugin's), the standard streams flushed. The teardown is left
    out: ~0.45 s of CPU a Snakemake run, which frees memory and runs the finalizers of objects still alive (a temporary
    file never closed stays), and changes nothing a run or job of the suite leaves behind."""
    threading._shutdown()  # what Py_FinalizeEx calls first; no public API does all of it
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
