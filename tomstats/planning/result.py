"""The result of a power analysis: curves, targets, a text table and the files written."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from tomstats._io import ensure_writable_dir, staged_files

__all__ = ["POWER_DATA", "POWER_FIGURE", "POWER_SUMMARY", "POWER_TABLE", "PowerFailureError",
           "PowerResult", "as_number", "format_power", "write_power"]

#: The files of a power folder (:func:`write_power`), named once.
POWER_TABLE = "power.csv"
POWER_DATA = "power.nc"
POWER_SUMMARY = "summary.json"
POWER_FIGURE = "power.png"


class PowerFailureError(ValueError):
    """More than 1 % of the fits of a test failed; power among the rest would be biased."""


@dataclass(frozen=True)
class PowerResult:
    """Result of :func:`power`.

    Attributes
    ----------
    data : xarray.Dataset
        Variables ``power``, ``ci_low``, ``ci_high`` (95 % Wilson), ``estimate`` (mean over
        valid fits), ``n_fits``, ``n_failed``, ``n_rejected`` over ``(kind, value, test)``
        (``(kind, by_value, value, test)`` with a second dimension ``by``);
        ``power_by_llm`` over ``(kind, value, test, llm)`` for the per-LLM tests when the
        LLMs have fixed capabilities. Attributes record the settings and provenance.
    """

    data: xr.Dataset

    def __str__(self) -> str:
        """The settings on one line, then :func:`format_power`'s table (power with its 95 %
        Monte Carlo interval per value and test, as simr prints it) and the targets."""
        a = self.data.attrs
        head = (f"PowerResult: {a.get('replicates', '?')} simulated studies per value, "
                f"level {a.get('alpha', '?')}, seed {a.get('seed', '?')}")
        return head + "\n" + format_power(self)

    def __repr__(self) -> str:
        """One line: what varies, the tests, the studies per value; ``print()`` shows the
        table."""
        from tomstats._printable import summary_line

        a = self.data.attrs
        d = self.data
        values = d.sizes.get("value", "?")
        by = f" by {self.by} ({d.sizes.get('by_value', '?')} values)" if self.by else ""
        tests = [str(t) for t in d["test"].values] if "test" in d.coords else []
        return summary_line(self, f"{self.along} at {values} values{by}",
                            f"tests {', '.join(tests)}",
                            f"{a.get('replicates', '?')} studies per value, seed "
                            f"{a.get('seed', '?')}")

    @property
    def along(self) -> str:
        """The varied dimension."""
        return str(self.data.attrs["along"])

    @property
    def by(self) -> str | None:
        """The second dimension (``None`` for a single curve per test)."""
        by = self.data.attrs.get("by")
        return None if by is None else str(by)

    def frame(self) -> pd.DataFrame:
        """One row per (kind, [by value,] value, test): the tidy view of :attr:`data`."""
        cols = ["power", "ci_low", "ci_high", "estimate", "n_fits", "n_failed", "n_rejected"]
        df = self.data[cols].to_dataframe().reset_index()
        df.insert(1, "along", self.along)
        for c in ("n_fits", "n_failed", "n_rejected"):
            df[c] = df[c].astype(int)
        if self.by is None:
            return df[["kind", "along", "value", "test", *cols]]
        df.insert(1, "by", self.by)
        df = df.sort_values(["kind", "by_value", "value"], kind="stable")
        return df[["kind", "by", "by_value", "along", "value", "test", *cols]].reset_index(
            drop=True)

    def targets(self, target: float | None = None) -> pd.DataFrame:
        """Smallest value of the varied dimension that reaches ``target`` power, per test.

        For each (kind, test), scanning the values in ascending order: ``value`` is the first
        whose power estimate is at least ``target``; ``value_optimistic`` the first whose
        Wilson upper bound is (the Monte Carlo error cannot exclude it); ``value_sure`` the
        first whose lower bound is; ``interpolated`` the linear interpolation between the
        last value below and the first at or above the target. ``None`` where not reached.

        Returns
        -------
        pandas.DataFrame
            One row per (kind, [by value,] test): ``kind``, [``by``, ``by_value``,] ``test``,
            ``target``, ``reached``, ``value``, ``value_optimistic``, ``value_sure``,
            ``interpolated``, ``power_at_value`` (the values keep their type; ``None`` where
            not reached).
        """
        records = self.target_records(target)
        df = pd.DataFrame(records, dtype=object)
        if not len(df):
            return df
        return df.astype({"target": float, "reached": bool})

    def target_records(self, target: float | None = None) -> list[dict[str, Any]]:
        """:meth:`targets` as a list of dicts (one per row), for JSON."""
        target = float(self.data.attrs["target"] if target is None else target)
        if not 0 < target < 1:
            raise ValueError(f"target must be in (0, 1), got {target!r}")
        if self.by is not None:
            return [{"by": self.by, "by_value": as_number(b), **t}
                    for b in self.data["by_value"].to_numpy()
                    for t in PowerResult(self.data.sel(by_value=b).drop_vars("by_value")
                                         .assign_attrs(by=None)).target_records(target)]
        out = []
        ds = self.data.sortby("value")
        values = ds["value"].to_numpy()
        for kind in ds["kind"].to_numpy():
            for test in ds["test"].to_numpy():
                sub = ds.sel(kind=kind, test=test)
                pw, lo, hi = (sub[v].to_numpy() for v in ("power", "ci_low", "ci_high"))

                def first(mask: np.ndarray) -> float | None:
                    idx = np.flatnonzero(mask)
                    return as_number(values[idx[0]]) if idx.size else None

                val = first(pw >= target)
                interp = None
                if val is not None:
                    k = int(np.flatnonzero(pw >= target)[0])
                    interp = as_number(values[k])
                    if k > 0 and pw[k - 1] < target:
                        w = (target - pw[k - 1]) / (pw[k] - pw[k - 1])
                        interp = float(values[k - 1] + w * (values[k] - values[k - 1]))
                out.append({"kind": str(kind), "test": str(test), "target": target,
                            "reached": val is not None, "value": val,
                            "value_optimistic": first(hi >= target),
                            "value_sure": first(lo >= target), "interpolated": interp,
                            "power_at_value": None if val is None else
                            float(pw[values == val][0])})
        return out


def as_number(v: Any) -> float | int:
    f = float(v)
    return int(f) if f.is_integer() else f


def write_power(result: PowerResult, out: str | os.PathLike[str], *,
                figure: bool = True) -> list[Path]:
    """Write ``power.csv``, ``power.nc``, ``summary.json`` and ``power.png`` into ``out``.

    Everything is staged in a temporary folder inside ``out`` and moved in file by file, so
    ``out`` never holds a half-written file.
    """
    out = ensure_writable_dir(out)
    with staged_files(out) as staged:
        stage = staged.stage
        result.frame().to_csv(stage / POWER_TABLE, index=False)
        result.data.to_netcdf(stage / POWER_DATA, engine="h5netcdf")
        attrs = {k: (json.loads(v) if k in ("tests", "items_per_cell", "n_llms", "by_values",
                                            "params", "design", "posterior",
                                            "posterior_params") else v)
                 for k, v in result.data.attrs.items()}
        from tomstats._distributed import provenance

        summary = {"settings": _jsonable(attrs), "targets": result.target_records(),
                   "power": _jsonable(result.frame().to_dict(orient="records")),
                   "run": provenance()}
        (stage / POWER_SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
        if figure:
            from tomstats.planning.figure import fig_power
            from tomstats.simulation.figures import save_figure

            save_figure(fig_power(result.frame(), float(result.data.attrs["target"])),
                        stage / POWER_FIGURE)
    return staged.written


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _percent(p: float, lo: float, hi: float) -> str:
    """``80.2 % (77.6, 82.6)``: a power and its 95 % interval, as simr prints them."""
    if not np.isfinite(p):
        return "n/a"
    return f"{100 * p:.1f} % ({100 * lo:.1f}, {100 * hi:.1f})"


def format_power(result: PowerResult) -> str:
    """A short text table: power in % (95 % Monte Carlo interval) per value and test, then
    the smallest value reaching the target per test."""
    df = result.frame()
    lines = []
    keys = ["kind"] if result.by is None else ["kind", "by_value"]
    for key, sub in df.groupby(keys, sort=False):
        kind, *rest = key if isinstance(key, tuple) else (key,)
        at = f" at {result.by} = {as_number(rest[0])}" if rest else ""
        lines.append(f"{kind} power{at}, {result.along} (rows) × test (columns):")
        tab = sub.pivot(index="value", columns="test", values="power")[
            list(dict.fromkeys(sub["test"]))]
        lo = sub.pivot(index="value", columns="test", values="ci_low")
        hi = sub.pivot(index="value", columns="test", values="ci_high")
        width = max(24, *(len(c) + 2 for c in tab.columns))
        lines.append(f"{'':>10}" + "".join(f"{c:>{width}}" for c in tab.columns))
        for v in tab.index:
            cells = "".join(f"{_percent(tab.loc[v, c], lo.loc[v, c], hi.loc[v, c]):>{width}}"
                            for c in tab.columns)
            lines.append(f"{as_number(v):>10}" + cells)
    smallest = as_number(df["value"].min())
    for t in result.target_records():
        at = f" ({t['by']} = {t['by_value']})" if "by" in t else ""
        if t["reached"]:
            fewer = " or fewer" if t["value"] == smallest else ""
            lines.append(f"{t['kind']}{at}: {t['test']} reaches {t['target']:.0%} power at "
                         f"{result.along} = {t['value']}{fewer} (MC range "
                         f"{t['value_optimistic']}"
                         f"–{t['value_sure'] if t['value_sure'] is not None else '>max'})")
        else:
            lines.append(f"{t['kind']}{at}: {t['test']} does not reach {t['target']:.0%} "
                         f"power within the values tried")
    return "\n".join(lines)
