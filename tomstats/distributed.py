"""Multi-process runs from Python: the API behind the command line's ``--distributed``.

A multi-process run is the same script started as :math:`P` processes by the user's launcher
(``srun``, ``mpirun`` or :math:`P` shell commands). Each process joins the others, then calls
the API functions as a single process would (``tomstats.simulate``, ``tomstats.power``,
``power_from_fit``, ``posterior_study``, ``run_study``): they split their work over all
processes — process :math:`i` of :math:`P` takes the items
:math:`[\\min(iq, n), \\min((i+1)q, n))`, :math:`q = \\lceil n/P \\rceil`, each drawing its random
numbers from its global index — and return the whole result on every process, the same as one
process with the same seed gives. Only process 0 should write files (:func:`is_writer`).

>>> import tomstats
>>> from tomstats import distributed
>>> from tomstats.simulation.study import load_study
>>> with distributed.session():                            # doctest: +SKIP
...     cfg = load_study("simulations/paper.toml")
...     ds = tomstats.simulate(cfg.design, cfg.params, replicates=100_000, seed=1)
...     if distributed.is_writer():
...         ds.to_netcdf("simulated.nc")

:func:`session` reads SLURM's or Open MPI's environment when given nothing, or takes the
coordinator ``HOST:PORT``, the number of processes and this process's index. A process that
dies or loses the coordinator ends every process of the run within ``timeout`` seconds with one
line on stderr and exit status 3. Without a session everything runs in one process, as before.
See the documentation page "Running on a cluster".
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Iterator

from tomstats._distributed import (
    DEFAULT_TIMEOUT,
    DistributedError,
    abort,
    finish,
    is_writer,
    process_count,
    process_index,
    provenance,
    start,
    started,
)

__all__ = ["DEFAULT_TIMEOUT", "DistributedError", "finish", "is_writer", "process_count",
           "process_index", "provenance", "session", "start", "started"]


@contextlib.contextmanager
def session(coordinator: str | None = None, num_processes: int | None = None,
            process_id: int | None = None, *,
            timeout: float = DEFAULT_TIMEOUT) -> Iterator[None]:
    """Join a multi-process run for the body of a ``with`` block, and leave it together.

    Parameters
    ----------
    coordinator : str, optional
        ``HOST:PORT`` of process 0's coordinator; with ``num_processes`` and ``process_id``.
        All three ``None``: read from SLURM's or Open MPI's environment.
    num_processes : int, optional
        The number of processes :math:`P` of the run.
    process_id : int, optional
        This process's index :math:`i`, ``0 <= i < P``.
    timeout : float
        Seconds to join the others, and the most a lost process can hold the run.

    Notes
    -----
    Must be entered before anything uses JAX's devices. On leaving, every process waits for
    the others and JAX's distributed service is shut down (:func:`finish`).

    An exception that leaves the body ends the run, as an error of the command line does: this
    process prints its traceback and one line, and exits with status 1 (130 for an interrupt,
    a ``SystemExit``'s own status); every other process ends within ``timeout`` seconds with
    exit status 3 and one line naming it. It is not raised on: once one process has failed,
    JAX's runtime cannot go on in the others, nor in this one after process 0 has gone. Catch
    what the work may raise inside the block.

    Raises
    ------
    ValueError, DistributedError
        As :func:`start`: options that do not go together; no coordinator within ``timeout``.
    """
    start(coordinator, num_processes, process_id, timeout=timeout)
    try:
        yield
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code == 0:
            finish(0)
            raise
        _fail(f"the session's body exited with status {code}", code)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except BaseException:  # noqa: BLE001 - every other failure ends the run the same way
        traceback.print_exc()
        _fail("an exception left the session's body (its traceback is above)", 1)
    else:
        finish(0)


def _fail(message: str, code: int) -> None:
    """End this process of the run with ``code`` after a failure in the session's body."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    abort(f"{message}; the run is stopped", code)
