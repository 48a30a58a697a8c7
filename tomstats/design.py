"""Factorial designs: named numeric factors, questions per cell, capability levels.

The paper's design (:func:`paper_design`) crosses context length 200/500/1000/2000/5000
words with ToM order 0/1/2, 500 questions a cell, for five capability levels
0.7/0.85/1.0/1.15/1.3. Designs can also be read from TOML (:func:`load_design`).
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tomstats._validate import check_keys, read_text

__all__ = ["Factor", "Design", "paper_design", "load_design", "load_toml", "CONTEXT", "TOM"]

#: Canonical factor names that equation (1) reads.
CONTEXT = "context_length"
#: Longest context length, in words, a design or a table may hold: above it is a typo (or an
#: overflow waiting to happen), not an experiment.
MAX_CONTEXT_WORDS = 1e9
TOM = "tom_order"


@dataclass(frozen=True)
class Factor:
    """A named factor with numeric levels (all finite, distinct)."""

    name: str
    levels: tuple[float, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"factor name must be a non-empty string, got {self.name!r}")
        try:
            levels = tuple(float(v) for v in self.levels)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"factor {self.name!r}: levels must be numbers, got {self.levels!r}"
            ) from exc
        if not levels:
            raise ValueError(f"factor {self.name!r}: levels must not be empty")
        if not all(math.isfinite(v) for v in levels):
            raise ValueError(f"factor {self.name!r}: levels must be finite, got {list(levels)}")
        if len(set(levels)) != len(levels):
            raise ValueError(f"factor {self.name!r}: levels must be distinct, got {list(levels)}")
        if self.name == CONTEXT and any(v <= 0 for v in levels):
            bad = [v for v in levels if v <= 0]
            raise ValueError(f"factor {CONTEXT!r}: context lengths must be > 0 words, got {bad}")
        if self.name == CONTEXT and any(v > MAX_CONTEXT_WORDS for v in levels):
            bad = [v for v in levels if v > MAX_CONTEXT_WORDS]
            raise ValueError(f"factor {CONTEXT!r}: context lengths must be at most "
                             f"{MAX_CONTEXT_WORDS:.0e} words, got {bad}")
        if self.name == TOM and any(v < 0 for v in levels):
            bad = [v for v in levels if v < 0]
            raise ValueError(f"factor {TOM!r}: ToM orders must be >= 0, got {bad}")
        object.__setattr__(self, "levels", levels)

    @property
    def size(self) -> int:
        """Number of levels."""
        return len(self.levels)


@dataclass(frozen=True)
class Design:
    """A two-factor design (context length × ToM order) with questions per cell.

    Parameters
    ----------
    factors : sequence of Factor
        Exactly the factors ``context_length`` and ``tom_order`` (in that order).
    n_per_cell : int or array of int, shape (n_context, n_tom)
        Questions per cell; a scalar gives a balanced design.
    capability : sequence of float
        Model capability levels :math:`m` (the simulator repeats the design for each).
    """

    factors: tuple[Factor, ...]
    n_per_cell: Any = 500
    capability: tuple[float, ...] = (1.0,)

    def __post_init__(self) -> None:
        factors = tuple(self.factors)
        names = [f.name for f in factors]
        if names != [CONTEXT, TOM]:
            raise ValueError(
                f"factors must be [{CONTEXT!r}, {TOM!r}] (equation (1) reads them), got {names}"
            )
        object.__setattr__(self, "factors", factors)
        shape = tuple(f.size for f in factors)
        try:
            n = np.asarray(self.n_per_cell)
        except ValueError:  # a ragged list of lists
            raise ValueError(f"n_per_cell must be a number or a (context × ToM) table of "
                             f"numbers, got {self.n_per_cell!r}") from None
        if n.dtype == object or not np.issubdtype(n.dtype, np.number):
            raise ValueError(f"n_per_cell must be integers, got {self.n_per_cell!r}")
        if not np.all(np.isfinite(n)) or np.any(n != np.round(n)):
            raise ValueError(f"n_per_cell must be whole numbers, got {n.tolist()!r}")
        if np.any(n < 1):
            raise ValueError(f"n_per_cell must be >= 1 in every cell, got {n.tolist()!r}")
        if n.ndim == 0:
            n = np.full(shape, int(n), dtype=np.int64)
        elif n.shape != shape:
            raise ValueError(
                f"n_per_cell has shape {n.shape}, expected {shape} (context × ToM levels)"
            )
        n = n.astype(np.int64)
        n.setflags(write=False)
        object.__setattr__(self, "n_per_cell", n)
        try:
            cap = tuple(float(v) for v in np.atleast_1d(self.capability))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"capability must be numbers, got {self.capability!r}") from exc
        if not cap or not all(math.isfinite(v) for v in cap):
            raise ValueError(f"capability must be a non-empty list of finite numbers, got {cap}")
        object.__setattr__(self, "capability", cap)

    @property
    def context(self) -> np.ndarray:
        """Context-length levels (words)."""
        return np.asarray(self.factors[0].levels)

    @property
    def tom(self) -> np.ndarray:
        """ToM-order levels."""
        return np.asarray(self.factors[1].levels)

    @property
    def shape(self) -> tuple[int, int]:
        """Cells per capability level: (n_context, n_tom)."""
        return (self.factors[0].size, self.factors[1].size)

    @property
    def balanced(self) -> bool:
        """True when every cell has the same number of questions."""
        return bool(np.all(self.n_per_cell == self.n_per_cell.flat[0]))

    @property
    def n_questions(self) -> int:
        """Questions per capability level (sum over cells)."""
        return int(self.n_per_cell.sum())

    def with_(self, **changes: Any) -> Design:
        """Copy with some fields changed."""
        kw = {"factors": self.factors, "n_per_cell": self.n_per_cell,
              "capability": self.capability}
        kw.update(changes)
        return Design(**kw)

    def to_dict(self) -> dict[str, Any]:
        """JSON/TOML-ready description."""
        n = self.n_per_cell
        return {
            "factors": [{"name": f.name, "levels": list(f.levels)} for f in self.factors],
            "questions_per_cell": int(n.flat[0]) if self.balanced else n.tolist(),
            "capability": list(self.capability),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Design:
        """Build from the ``[design]`` table of a simulation TOML (see :func:`load_design`)."""
        check_keys(d, ("factors", "questions_per_cell", "capability"), "[design]")
        raw = d.get("factors")
        if not isinstance(raw, Sequence) or not raw:
            raise ValueError(f"[design].factors must be a non-empty list of tables, got {raw!r}")
        factors = []
        for i, f in enumerate(raw):
            if not isinstance(f, Mapping) or "name" not in f or "levels" not in f:
                raise ValueError(f"[design].factors[{i}] needs 'name' and 'levels', got {f!r}")
            factors.append(Factor(f["name"], tuple(f["levels"])))
        cap = d.get("capability", (1.0,))
        try:
            return cls(
                factors=tuple(factors),
                n_per_cell=d.get("questions_per_cell", 500),
                capability=tuple(cap) if isinstance(cap, list | tuple) else (cap,),
            )
        except ValueError as exc:  # name the TOML key, not the Python argument
            msg = str(exc)
            if msg.startswith("n_per_cell"):
                msg = "questions_per_cell" + msg[len("n_per_cell"):]
            raise ValueError(f"[design] {msg}") from None


def paper_design() -> Design:
    """The simulation paper's 5×3 design, 500 questions a cell, five capability levels."""
    return Design(
        factors=(
            Factor(CONTEXT, (200, 500, 1000, 2000, 5000)),
            Factor(TOM, (0, 1, 2)),
        ),
        n_per_cell=500,
        capability=(0.7, 0.85, 1.0, 1.15, 1.3),
    )


def load_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a TOML file, with an error naming the file (and line, for bad UTF-8) on failure.

    The one TOML reader of tomstats: simulation files, storyboards and model files use it.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"TOML file {str(p)!r} does not exist")
    try:
        return tomllib.loads(read_text(p))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{p}: invalid TOML: {exc}") from exc
    except RecursionError:  # arrays or tables nested thousands deep
        raise ValueError(f"{p}: invalid TOML: nested too deeply to read") from None


def load_design(path: str | os.PathLike[str]) -> Design:
    """Read the ``[design]`` table of a simulation TOML file (e.g. ``simulations/paper.toml``)."""
    data = load_toml(path)
    if "design" not in data:
        raise ValueError(f"{path}: no [design] table")
    try:
        return Design.from_dict(data["design"])
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
