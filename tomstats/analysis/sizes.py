"""Size guard of the cluster bootstrap (``anova --ci``, ``report`` of a log).

The bootstrap holds the cell statistics (count, Σy, Σy²) of every resample at once: an array
of ``n_boot × cells × 3`` floats, plus the effect sizes of every resample. ``--n-boot 1e9``
asked for about 200 GiB; :func:`bootstrap_footprint` turns the sizes into a
:class:`tomstats._guards.Footprint` that :func:`tomstats._guards.check_footprint` refuses up
front (``--allow-large`` overrides).
"""

from __future__ import annotations

from tomstats._guards import Footprint, check_footprint

__all__ = ["MIN_CELLS", "bootstrap_footprint", "check_bootstrap_size"]

#: Cells of the smallest design an ANOVA takes (2 × 2): the bound used before the data are read.
MIN_CELLS = 4
#: Bytes per resample and cell: (count, Σy, Σy²) as float64, and the draws that make them.
_BYTES_PER_CELL = 3 * 8 + 8
#: Rough seconds per resample and cell (one multinomial draw and a small product).
_SECONDS_PER_CELL = 2e-7


def bootstrap_footprint(n_boot: int, n_cells: int = MIN_CELLS, n_tables: int = 1) -> Footprint:
    """Memory and time of ``n_boot`` resamples of ``n_cells`` cells, for ``n_tables`` tables.

    Memory: :math:`B \\cdot C \\cdot 32` bytes (one table at a time); time:
    :math:`B \\cdot C \\cdot T \\cdot 2\\times10^{-7}` s.
    """
    b, c, t = max(int(n_boot), 0), max(int(n_cells), 1), max(int(n_tables), 1)
    return Footprint("bootstrap", float(b) * c * _BYTES_PER_CELL,
                     float(b) * c * t * _SECONDS_PER_CELL,
                     f"{b:,} resamples × {c:,} cells" + (f" × {t:,} tables" if t > 1 else ""))


def check_bootstrap_size(n_boot: int, n_cells: int = MIN_CELLS, n_tables: int = 1, *,
                         allow_large: bool = False) -> None:
    """Refuse (``ValueError``) a bootstrap that would not fit in memory or take over a day."""
    check_footprint(bootstrap_footprint(n_boot, n_cells, n_tables), allow_large=allow_large,
                    flag="--allow-large")
