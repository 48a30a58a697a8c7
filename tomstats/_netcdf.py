"""One size-checked opener of the netCDF files tomstats reads (fits, posteriors).

A netCDF (HDF5) file declares each variable's shape in its metadata and stores the values in
chunks, compressed or not written at all (then they read as the fill value). A file of a few
hundred kilobytes can therefore declare a variable of 10⁹ elements, and a reader that loads
it asks for gigabytes. :func:`check_netcdf_budget` reads only the metadata — every variable of
every group, coordinates included — and refuses the file before any array is read when

- the bytes it declares (shape × item size, summed) are more than the file can hold:
  :data:`NETCDF_MAX_RATIO` × the bytes the file occupies on disk (deflate, the compression
  netCDF writers use, expands at most 1032-fold), or :data:`NETCDF_FLOOR`, whichever is
  larger; or
- they are more than the memory budget of :func:`tomstats._guards.check_footprint`
  (a share of the available memory).

:func:`open_inference_data` runs that check, then opens the file with ArviZ.
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tomstats._guards import Footprint, check_footprint, format_bytes

__all__ = ["NETCDF_FLOOR", "NETCDF_MAX_RATIO", "NetcdfBudgetError", "check_netcdf_budget",
           "declared_bytes", "netcdf_engines", "open_inference_data"]

#: Most bytes a file may declare per byte it occupies on disk (deflate's largest ratio).
NETCDF_MAX_RATIO = 1032
#: Bytes any file may declare whatever its size (a small fit compresses well).
NETCDF_FLOOR = 256 * 2**20


class NetcdfBudgetError(ValueError):
    """A netCDF file that declares more data than it holds or than memory allows."""


def netcdf_engines(prefer: Sequence[str] = ("netcdf4", "h5netcdf")) -> list[str]:
    """The xarray engines of ``prefer`` whose library is installed (``netcdf4``: netCDF4;
    ``h5netcdf``: h5netcdf and h5py), in that order."""
    needs = {"netcdf4": ("netCDF4",), "h5netcdf": ("h5netcdf", "h5py")}
    return [e for e in prefer
            if all(importlib.util.find_spec(m) is not None for m in needs[e])]


def _variables(path: Path) -> Iterator[tuple[str, tuple[int, ...], int]]:
    """``(name, shape, item size)`` of every variable of every group, from the metadata."""
    if importlib.util.find_spec("netCDF4") is not None:
        import netCDF4

        with netCDF4.Dataset(str(path), "r") as root:
            stack = [root]
            while stack:
                group = stack.pop()
                for name, var in group.variables.items():
                    dtype = var.dtype
                    size = getattr(dtype, "itemsize", 8) or 8  # str (variable length): 8
                    yield f"{group.path.rstrip('/')}/{name}", tuple(var.shape), int(size)
                stack.extend(group.groups.values())
        return
    import h5py

    found: list[tuple[str, tuple[int, ...], int]] = []

    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset):
            found.append((f"/{name}", tuple(obj.shape or ()), int(obj.dtype.itemsize or 8)))

    with h5py.File(str(path), "r") as fh:
        fh.visititems(visit)
    yield from found


def declared_bytes(path: str | os.PathLike[str]) -> tuple[int, str]:
    """The bytes the variables of ``path`` declare (shape × item size, summed over every
    variable of every group) and the largest variable in words, from the metadata alone."""
    total, largest, what = 0, -1, "no variable"
    for name, shape, itemsize in _variables(Path(path)):
        n = math.prod(shape) * itemsize
        total += n
        if n > largest:
            largest, what = n, f"{name} {'×'.join(map(str, shape)) or 'scalar'}"
    return total, what


def _stored_bytes(path: Path) -> int:
    """Bytes the file occupies on disk: its size, or less for a sparse file (its blocks)."""
    st = path.stat()
    blocks = getattr(st, "st_blocks", 0)
    return min(st.st_size, blocks * 512) if blocks else st.st_size


def check_netcdf_budget(path: str | os.PathLike[str], field: str = "fit") -> int:
    """Refuse a netCDF file whose variables declare more bytes than it can hold or than
    memory allows (see the module docstring); return the bytes it declares.

    Raises
    ------
    NetcdfBudgetError
        One line naming the file, the bytes declared and the largest variable.
    OSError, ValueError
        The file is not netCDF/HDF5 (from the netCDF library).
    """
    p = Path(path)
    total, largest = declared_bytes(p)
    stored = _stored_bytes(p)
    limit = max(NETCDF_FLOOR, NETCDF_MAX_RATIO * stored)
    if total > limit:
        raise NetcdfBudgetError(
            f"{field}: {str(p)!r} declares {format_bytes(total)} of data (largest: {largest}) "
            f"in {format_bytes(stored)} on disk; a netCDF file holds at most "
            f"{NETCDF_MAX_RATIO} times its size (or {format_bytes(NETCDF_FLOOR)}): the file "
            f"is damaged or forged, refused before reading it")
    try:
        check_footprint(Footprint(f"{field} {str(p)!r}", float(total), 0.0,
                                  f"its variables declare {format_bytes(total)}; largest: "
                                  f"{largest}"), flag=None)
    except ValueError as exc:
        raise NetcdfBudgetError(str(exc)) from None
    return total


def open_inference_data(path: str | os.PathLike[str], *, field: str = "fit",
                        engines: Sequence[str] = ("netcdf4", "h5netcdf"),
                        eager: bool = True) -> Any:
    """:func:`check_netcdf_budget`, then ``arviz.from_netcdf`` with the first installed engine
    of ``engines`` (every array loaded with ``eager``; else read when used).

    Raises
    ------
    NetcdfBudgetError
        The file declares too much (nothing was read).
    ValueError
        Neither netCDF4 nor h5py is installed.
    Exception
        Whatever the netCDF library raises for a file it cannot read (the callers word it).
    """
    import arviz as az

    usable = netcdf_engines(engines)
    if not usable:
        raise ValueError(f"{field}: reading netCDF needs the netCDF4 package (or h5py for "
                         "h5netcdf); install one of them")
    check_netcdf_budget(path, field)
    with az.rc_context({"data.load": "eager" if eager else "lazy"}):
        return az.from_netcdf(str(path), engine=usable[0])
