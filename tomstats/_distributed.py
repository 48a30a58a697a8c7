"""Runs over several processes and hosts (``jax.distributed``): one place for starting,
splitting, gathering and failing.

A multi-process run is N copies of the same command, started by the user's launcher (``srun``,
``mpirun`` or N shell commands), each joining the others with :func:`start` (the command
line's ``--distributed``, or ``--coordinator HOST:PORT --num-processes N --process-id I``).
Then:

- **Split.** Work indexed ``0..n-1`` (replicates, studies, blocks of refits) is cut into
  contiguous shares: process :math:`i` of :math:`P` takes :func:`share`,
  :math:`[\\min(i q, n), \\min((i+1) q, n))` with :math:`q = \\lceil n / P\\rceil`. Every item
  draws its random numbers from a key or stream derived from its *global* index, so a result
  does not depend on :math:`P`.
- **Gather.** :func:`gather_rows` and :func:`allgather_object` send every process's part to all
  (``jax.experimental.multihost_utils.process_allgather`` of the pickled bytes, so dtypes and
  bits travel unchanged); the parts are laid end to end in process order.
- **Write.** Only process 0 writes (:func:`is_writer`); it also draws the one progress bar.
- **Fail.** A watchdog thread beats a heartbeat into the coordinator's key-value store every
  second and reads the others'. A process whose heartbeat stops for ``timeout / 3`` seconds, a
  coordinator that stops answering, a collective that fails or a process that ends with an
  error: every process prints one line and ends (:func:`abort`, exit 3; the failing
  process's own status when it reported one), without writing; JAX's own heartbeat limit is
  ``timeout``, so the watchdog speaks first.

Without :func:`start` nothing here touches ``jax.distributed``: one process, :func:`share` is
everything, the gathers return their input.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DistributedError", "abort", "allgather_object", "alone", "finish", "gather_rows",
           "is_writer", "on_abort", "process_count", "process_index", "progress_allowed",
           "provenance", "share", "start", "started", "workers"]

#: Seconds to join the others, and the most a lost process can hold the run (default).
DEFAULT_TIMEOUT = 30
_PREFIX = "tomstats-run"


class DistributedError(RuntimeError):
    """A multi-process run could not start (no coordinator, bad options)."""


@dataclass
class _State:
    started: bool = False
    index: int = 0
    count: int = 1
    timeout: float = DEFAULT_TIMEOUT
    client: Any = None
    hooks: list[Callable[[], None]] = field(default_factory=list)
    finishing: bool = False
    alone: int = 0
    last_ok: float = 0.0
    gathered_bytes: int = 0
    gather_seconds: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)


_STATE = _State()


def started() -> bool:
    """Whether this process is one of a multi-process run."""
    return _STATE.started


def process_index() -> int:
    """This process's index (0 without :func:`start`)."""
    return _STATE.index


def process_count() -> int:
    """Processes of the run (1 without :func:`start`)."""
    return _STATE.count


def _splitting() -> bool:
    return _STATE.started and _STATE.count > 1 and not _STATE.alone


def workers() -> int:
    """Processes the work is split over now: :func:`process_count`, or 1 inside
    :func:`alone` and without :func:`start`."""
    return _STATE.count if _splitting() else 1


@contextlib.contextmanager
def alone() -> Iterator[None]:
    """Inside, this process works alone: :func:`share` is everything and the gathers return
    their input (an outer loop has already split the work, e.g. draw chunks)."""
    _STATE.alone += 1
    try:
        yield
    finally:
        _STATE.alone -= 1


def is_writer() -> bool:
    """Whether this process writes the outputs (process 0)."""
    return _STATE.index == 0


def progress_allowed(progress: bool | None) -> bool | None:
    """``progress`` on process 0; off on every other process (one bar for the run)."""
    return progress if is_writer() else False


def share(n: int, index: int | None = None, count: int | None = None) -> tuple[int, int]:
    """This process's contiguous part ``[lo, hi)`` of ``n`` items.

    .. math:: q = \\lceil n / P\\rceil,\\qquad [lo, hi) = [\\min(iq, n), \\min((i+1)q, n))

    The first processes take full parts of :math:`q` items, so the parts laid end to end in
    process order are ``0..n-1``.
    """
    if index is None and count is None and not _splitting():
        return 0, int(n)
    i = _STATE.index if index is None else int(index)
    p = _STATE.count if count is None else int(count)
    q = -(-int(n) // p)
    lo = min(i * q, int(n))
    return lo, min(lo + q, int(n))


def provenance() -> dict[str, Any]:
    """How the run was spread: processes, devices (all and this process's), the backend, and
    what this process received from the gathers so far (bytes) and the seconds they took
    (waiting for the slowest process included)."""
    import jax

    return {"processes": process_count(), "devices": jax.device_count(),
            "local_devices": jax.local_device_count(), "backend": jax.default_backend(),
            "gathered_bytes": _STATE.gathered_bytes,
            "gather_seconds": round(_STATE.gather_seconds, 3)}


# --------------------------------------------------------------------------- start


def start(coordinator: str | None = None, num_processes: int | None = None,
          process_id: int | None = None, *, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Join a multi-process run: ``jax.distributed.initialize`` (from the environment under
    SLURM or Open MPI when the three are ``None``), CPU collectives over gloo, the watchdog.

    Must run before anything else uses JAX's devices.

    Raises
    ------
    ValueError
        Options that do not go together.
    DistributedError
        The coordinator not reached within ``timeout`` seconds.
    """
    if _STATE.started:
        return
    given = [coordinator is not None, num_processes is not None, process_id is not None]
    if any(given) and not all(given):
        raise ValueError("--coordinator, --num-processes and --process-id go together "
                               "(or none of them: --distributed reads SLURM or Open MPI's "
                               "environment)")
    if num_processes is not None and (num_processes < 1 or not 0 <= process_id < num_processes):
        raise ValueError(f"--process-id must be in 0..{num_processes - 1} with "
                               f"--num-processes {num_processes}, got {process_id}")
    if not timeout > 0:
        raise ValueError(f"--distributed-timeout must be > 0 seconds, got {timeout}")
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    t = max(3, int(math.ceil(timeout)))
    where = coordinator or "from the environment"
    if num_processes is not None:  # named in the messages before the run is joined
        _STATE.index, _STATE.count = int(process_id), int(num_processes)
    _delay_fatal_aborts()
    joined = threading.Event()
    threading.Thread(target=_join_timer, args=(joined, t, where), daemon=True).start()
    try:
        jax.distributed.initialize(coordinator, num_processes, process_id,
                                   initialization_timeout=t + 5, heartbeat_timeout_seconds=t,
                                   shutdown_timeout_seconds=t)
    except Exception as exc:  # noqa: BLE001 - any failure to join is the same failure
        raise DistributedError(_join_failure(" ".join(str(exc).split()), where, t)) from None
    finally:
        joined.set()
    from jax._src import distributed as _jd

    _STATE.started = True
    _STATE.index, _STATE.count = jax.process_index(), jax.process_count()
    _STATE.timeout = float(timeout)
    _STATE.client = _jd.global_state.client
    _STATE.last_ok = time.monotonic()
    _beat()
    threading.Thread(target=_watchdog, name="tomstats-watchdog", daemon=True).start()
    threading.Thread(target=_monitor, name="tomstats-monitor", daemon=True).start()
    atexit.register(_at_exit)


def _join_failure(text: str, where: str, t: int) -> str:
    """The one line that says why joining failed (JAX's own words, made specific)."""
    if "coordinator_address should be defined" in text:
        return ("no multi-process environment found (SLURM or Open MPI, for --distributed): "
                "start the processes with srun or mpirun, or give --coordinator HOST:PORT "
                "--num-processes N --process-id I")
    if "before any JAX calls" in text:
        return ("JAX was used in this process before the run was joined: join it first "
                "(tomstats.distributed.session() or start() before any other work)")
    return f"cannot join the run (coordinator {where}) within {t} s: {text[:300]}"


def _delay_fatal_aborts() -> None:
    """Hold a fatal error of JAX's distributed runtime for 6 s, so that the watchdog ends the
    run with its one line and exit 3 first.

    When the coordinator goes away, JAX's client ends the process from one of its threads
    (``LOG(FATAL)``: ``abort()``, status 134). ``SIGABRT``'s handler becomes the C library's
    ``sleep`` (called with the signal's number, 6: six seconds); the aborting thread sleeps,
    then ``abort()`` ends the process as before, so a genuine crash still ends it."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None)
        libc.signal.restype = ctypes.c_void_p
        libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
        libc.signal(int(signal.SIGABRT), ctypes.cast(libc.sleep, ctypes.c_void_p))
    except (OSError, AttributeError, TypeError):  # not a C library with signal(): as is
        pass


def _join_timer(joined: threading.Event, t: int, where: str) -> None:
    """End a process that has not joined the run within ``t`` seconds."""
    if not joined.wait(t):
        abort(f"cannot reach the coordinator ({where}) within {t} s: is process 0 running, "
              "and are the address and port right?")


def _key(kind: str, i: int) -> str:
    return f"{_PREFIX}/{kind}/{i}"


def _beat(n: int = 0) -> None:
    _STATE.client.key_value_set(_key("beat", _STATE.index), str(n), allow_overwrite=True)


def _try_get(key: str) -> str | None:
    try:
        return str(_STATE.client.key_value_try_get(key))
    except Exception as exc:  # noqa: BLE001
        if "NOT_FOUND" in str(exc).upper().replace(" ", "_"):
            return None
        raise


def _watchdog() -> None:
    """Beat every second; end the run when a peer's beat stops for ``timeout / 3`` seconds,
    a peer ends with an error or the coordinator fails to answer twice in a row."""
    stale = max(2.0, _STATE.timeout / 3)
    peers = [j for j in range(_STATE.count) if j != _STATE.index]
    seen = {j: (None, time.monotonic()) for j in peers}
    n, failures = 0, 0
    while not _STATE.stop.wait(1.0):
        now = time.monotonic()
        try:
            n += 1
            _beat(n)
            for j in peers:
                done = _try_get(_key("done", j))
                if done is not None and int(done) != 0 and not _STATE.finishing:
                    abort(f"process {j} of {_STATE.count} stopped with exit status {done} (its "
                          "message says why); the run is stopped, nothing was written",
                          int(done) if int(done) in (2, 3) else 3)
                beat = _try_get(_key("beat", j))
                if done is not None or beat != seen[j][0]:
                    seen[j] = (beat, now)
                elif now - seen[j][1] > stale:
                    abort(f"process {j} of {_STATE.count} stopped answering (no heartbeat for "
                          f"{stale:.0f} s: killed, crashed or its host is unreachable); the run "
                          "is stopped, nothing was written")
            _STATE.last_ok, failures = time.monotonic(), 0
        except Exception as exc:  # noqa: BLE001 - the coordinator is gone or unreachable
            failures += 1
            if failures >= 2:
                abort(f"lost the coordinator (process 0: {' '.join(str(exc).split())[:120]}); "
                      "the run is stopped, nothing was written")


#: Seconds the watchdog's calls to the coordinator may hang (they take milliseconds; JAX's
#: own end of a process that lost the coordinator is held 6 s by :func:`_delay_fatal_aborts`).
_HANG = 4.0


def _monitor() -> None:
    """End the run when the watchdog's calls to the coordinator hang for :data:`_HANG` s."""
    while not _STATE.stop.wait(0.5):
        if time.monotonic() - _STATE.last_ok > _HANG:
            abort(f"lost the coordinator (process 0 has not answered for {_HANG:.0f} s); the "
                  "run is stopped, nothing was written")


def on_abort(hook: Callable[[], None]) -> None:
    """Run ``hook`` (e.g. remove this process's temporary files) before :func:`abort` exits."""
    _STATE.hooks.append(hook)


def abort(message: str, code: int = 3) -> None:
    """Print ``tomstats: error: MESSAGE`` on stderr, run the hooks, tell the others (its
    status in the key-value store) and end the process at once with ``code`` (no interpreter
    shutdown: JAX's own would wait for the lost process)."""
    try:
        print(f"tomstats: error: {message} (process {_STATE.index} of {_STATE.count})",
              file=sys.stderr, flush=True)
        for hook in _STATE.hooks:
            try:
                hook()
            except Exception:  # noqa: BLE001, S110 - best effort on the way out
                pass
        if _STATE.client is not None:  # at most a second: the coordinator may be gone
            told = threading.Thread(target=_tell_done, args=(code,), daemon=True)
            told.start()
            told.join(1.0)
    finally:
        os._exit(code)


def _tell_done(code: int) -> None:
    try:
        _STATE.client.key_value_set(_key("done", _STATE.index), str(code), allow_overwrite=True)
    except Exception:  # noqa: BLE001, S110 - best effort on the way out
        pass


def finish(code: int) -> None:
    """End a multi-process run in step: say this process's status, wait for every other to
    say its own (the watchdog still ends a wait on a lost one), then shut JAX's service down
    together. A no-op without :func:`start`."""
    if not _STATE.started or _STATE.finishing:
        return
    _STATE.finishing = True
    try:
        _STATE.client.key_value_set(_key("done", _STATE.index), str(int(code)),
                                    allow_overwrite=True)
        for j in range(_STATE.count):
            while _try_get(_key("done", j)) is None:
                time.sleep(0.2)
        _STATE.stop.set()
        import jax

        jax.distributed.shutdown()
    except Exception as exc:  # noqa: BLE001 - the coordinator went away at the very end
        abort(f"could not end the run together with the other processes "
              f"({' '.join(str(exc).split())[:120]})", int(code) or 3)
    _STATE.started = False


def _at_exit() -> None:
    if _STATE.started and not _STATE.finishing:
        try:
            finish(0)
        except Exception:  # noqa: BLE001 - the interpreter is ending anyway
            os._exit(3)


# --------------------------------------------------------------------------- gather


def _allgather_bytes(data: bytes) -> list[bytes]:
    """Every process's ``data``, in process order (two ``process_allgather`` calls: the
    lengths, then the bytes padded to the longest)."""
    import numpy as np
    from jax.experimental import multihost_utils

    t0 = time.perf_counter()
    try:
        lengths = np.asarray(multihost_utils.process_allgather(
            np.array([len(data)], dtype=np.int32))).reshape(-1)
        buf = np.zeros(int(lengths.max()), dtype=np.uint8)
        buf[:len(data)] = np.frombuffer(data, dtype=np.uint8)
        parts = np.asarray(multihost_utils.process_allgather(buf)).reshape(len(lengths), -1)
    except Exception as exc:  # noqa: BLE001 - a lost peer shows here first
        abort(f"exchanging results with the other processes failed "
              f"({' '.join(str(exc).split())[:160]}): a process was lost; the run is "
              "stopped, nothing was written")
        raise  # pragma: no cover - abort does not return
    _STATE.gather_seconds += time.perf_counter() - t0
    _STATE.gathered_bytes += int(lengths.sum())
    return [parts[i, :int(n)].tobytes() for i, n in enumerate(lengths)]


def allgather_object(obj: Any) -> list[Any]:
    """Every process's ``obj`` (picklable), in process order; ``[obj]`` with one process."""
    if not _splitting():
        return [obj]
    return [pickle.loads(b) for b in _allgather_bytes(pickle.dumps(obj, protocol=5))]  # noqa: S301 - our own processes' bytes


def gather_rows(local: Mapping[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """Arrays of the whole index range from each process's :func:`share` of rows.

    ``local`` holds this process's rows ``[lo, hi)`` of each array (first axis); the result
    holds rows ``0..n-1``, bit for bit as computed."""
    import numpy as np

    if not _splitting():
        return {k: np.asarray(v) for k, v in local.items()}
    parts = allgather_object({k: np.asarray(v) for k, v in local.items()})
    keys = next((p.keys() for p in parts if p), local.keys())
    out = {k: np.concatenate([p[k] for p in parts if k in p]) for k in keys}
    for k, v in out.items():
        if v.shape[0] != n:
            raise RuntimeError(f"gathered {v.shape[0]} rows of {k!r}, expected {n}")
    return out
