"""Study specifications: the content of a simulation TOML, shared by every stage that runs one.

A simulation TOML has the tables ``[design]`` (:class:`tomstats.design.Design`),
``[parameters]`` (equation (1)'s α, γ, δ, σ), ``[simulation]`` (replicates, seed, path),
``[sensitivity]`` (the γ × α grid) and ``[power]`` (:class:`PowerSpec`: what a power analysis
varies and tests). :func:`load_study` reads one into a :class:`StudyConfig`;
:mod:`tomstats.simulation.reproduce`, :mod:`tomstats.simulation.posterior_sweep` and
:mod:`tomstats.planning` all import it from here, so the data flow one way.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from tomstats._validate import check_keys, check_type, closest_hint
from tomstats.design import Design, load_toml, paper_design
from tomstats.model import Params
from tomstats.simulation.paper import PAPER_PARAMS
from tomstats.simulation.sensitivity_grid import PAPER_ALPHA, PAPER_GAMMA, grid_values

__all__ = ["ALONG", "PowerSpec", "SpecOption", "StudyConfig", "load_study", "spec_options",
           "study_from_dict"]

PATHS = ("exact", "bernoulli")
#: How stories meet context lengths: a new story per length, or one story told at every length.
STORY_DESIGNS = ("between", "within")
#: Sphericity corrections of the repeated-measures ANOVA tests of a power analysis.
CORRECTIONS = ("GG", "HF", "none")
_PARAM_NAMES = ("alpha", "gamma", "delta", "sigma")
#: Dimensions a power analysis can vary: design sizes (whole numbers) and parameters.
ALONG = ("questions_per_cell", "items_per_cell", "n_llms", *_PARAM_NAMES)
_TABLES = ("design", "parameters", "simulation", "sensitivity", "power", "meta")


def _positive_int(name: str, v: Any, low: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
    return int(v)


@dataclass(frozen=True)
class SpecOption:
    """How one field of :class:`PowerSpec` is given: as a key of the ``[power]`` table
    (``table``) and as a ``tomstats power`` option (``cli``; ``help`` ``None`` lists it
    without a help text). ``{tests}`` in ``help`` is filled in by the command line."""

    table: bool = True
    cli: bool = True
    help: str | None = None
    flag: str | None = None
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    repeat: bool = False


def _option(default: Any, **how: Any) -> Any:
    """A :class:`PowerSpec` field with its :class:`SpecOption` (the one declaration)."""
    table = how.pop("table", True)
    return field(default=default, metadata={"option": SpecOption(
        table=table, cli=how.pop("cli", table), **how)})


def spec_options() -> list[tuple[str, SpecOption]]:
    """``(field name, SpecOption)`` of every :class:`PowerSpec` field, in declaration order."""
    return [(f.name, f.metadata["option"]) for f in fields(PowerSpec)]


@dataclass(frozen=True)
class PowerSpec:
    """What a power analysis varies and tests (the ``[power]`` table of a simulation TOML).

    Attributes
    ----------
    along : str
        The dimension varied: ``questions_per_cell`` (questions per design cell and LLM),
        ``items_per_cell`` (stories per cell; each carries one item effect
        :math:`\\varepsilon\\sim N(0,\\sigma^2)` shared by its questions and by every LLM),
        ``n_llms`` (LLMs answering the same items), or a parameter ``alpha``, ``gamma``,
        ``delta``, ``sigma``.
    values : tuple of float
        The values of ``along`` (whole numbers >= 1 for the sizes).
    tests : tuple of str
        Test identifiers (see :data:`tomstats.planning.analyses.TESTS`), e.g.
        ``"anova:interaction"``,
        ``"glm-lrt:delta"``, ``"glmm-wald:delta"``.
    alpha : float
        Significance level in (0, 1).
    replicates : int
        Simulated studies per value.
    target : float
        Target power in (0, 1) for the sample-size summary.
    seed : int
    items_per_cell : int or None
        Stories per cell; ``None``: one story per question (the paper's per-question noise).
    story_design : {"between", "within"}
        ``between``: every context length has stories of its own (item effects
        :math:`\\varepsilon_{cti}`, :math:`C T I` stories). ``within``: length ladders, story
        :math:`i` of order :math:`t` told at every length with one effect
        :math:`\\varepsilon_{ti}` (:math:`T I` stories); the same questions and LLM calls,
        but a context contrast no longer mixes in story differences. Studies are then
        simulated story by story, and the GLMM tests' ``(1 | item)`` has a level per story.
    n_llms : int or None
        LLMs; ``None``: one per capability level of the design (fixed capabilities). Given,
        the capabilities are drawn per study from :math:`N(\\bar m, s_m^2)` (population of
        LLMs), with :math:`\\bar m` the design's mean capability and :math:`s_m`
        ``capability_sd``.
    capability_sd : float or None
        :math:`s_m`; default the sd of the design's capability levels (0.15 for one level).
    path : {"exact", "bernoulli"}
        Cell counts drawn as binomials (exact, the default) or question by question.
    by : str or None
        A second dimension (one of the same names, not ``along``): the whole curve along
        ``along`` is repeated at each of ``by_values``, e.g. the questions per cell needed
        for 80 % power with 3, 5 or 8 LLMs.
    by_values : tuple of float
        The values of ``by`` (empty when ``by`` is None).
    correction : {"GG", "HF", "none"}
        Sphericity correction of the ``rm-anova`` tests: Greenhouse–Geisser (the default, as
        afex), Huynh–Feldt (:math:`\\min(1, \\tilde\\varepsilon)`), or none.
    """

    along: str = _option(
        "questions_per_cell", metavar="NAME=V1,V2,...",
        help="dimension and values to vary, NAME one of "
             + ", ".join("alpha_context" if a == "alpha" else a for a in ALONG)
             + " (alpha_context: equation (1)'s context decay α) (default: the TOML's [power] "
               "along)")
    values: tuple[float, ...] = _option((20, 50, 100, 200, 500), table=False)
    tests: tuple[str, ...] = _option(
        ("anova:tom_order", "anova:context_length", "anova:interaction", "glm-lrt:delta"),
        flag="--test", metavar="TEST", repeat=True,
        help="test to run (repeatable): {tests} (default: the TOML's [power] tests)")
    alpha: float = _option(0.05, type=float, flag="--level", metavar="A",
                           help="significance level of the tests (default: the TOML's [power] "
                                "alpha, 0.05)")
    replicates: int = _option(
        1000, type=int,
        help="simulated studies per value (default: the TOML's [power] replicates, 1000); "
             "with --posterior, study r uses posterior draw r mod --draws, so each draw "
             "serves about replicates/draws studies")
    target: float = _option(0.8, type=float, help="target power (default 0.8)")
    seed: int = _option(0, type=int, help="random seed (default: the TOML's [power] seed, 0)")
    items_per_cell: int | None = _option(
        None, type=int, help="stories per cell (default: one per question)")
    story_design: str = _option(
        "between", choices=STORY_DESIGNS, flag="--story-design",
        help="'between' (default): a new story at every context length; 'within': length "
             "ladders, each story told at every length, its item effect shared by all of them")
    n_llms: int | None = _option(
        None, type=int,
        help="LLMs with capabilities drawn from N(mean, capability_sd) per study (default: "
             "one LLM per capability level of the design, fixed)")
    capability_sd: float | None = _option(None, cli=False)
    path: str = _option("exact", help="'exact' (default) or 'bernoulli'")
    by: str | None = _option(
        None, metavar="NAME=V1,V2,...",
        help="a second dimension: the curve along --along is repeated at each value, e.g. "
             "--along questions_per_cell=10,20,50 --by n_llms=3,5,8 (default: none)")
    by_values: tuple[float, ...] = _option((), table=False)
    correction: str = _option(
        "GG", choices=CORRECTIONS,
        help="sphericity correction of the rm-anova tests (default GG, as afex)")

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", _dimension_values("along", self.along, self.values))
        if self.by is None:
            if len(self.by_values):
                raise ValueError(f"by_values given ({list(self.by_values)}) without by")
            object.__setattr__(self, "by_values", ())
        else:
            if self.by == self.along:
                raise ValueError(f"by: {self.by!r} is already the dimension `along` varies; "
                                 "choose another (e.g. along questions_per_cell, by n_llms)")
            object.__setattr__(self, "by_values",
                               _dimension_values("by", self.by, self.by_values))
        tests = (self.tests,) if isinstance(self.tests, str) else tuple(self.tests)
        if not tests:
            raise ValueError("tests: give at least one test")
        object.__setattr__(self, "tests", tests)
        a = self.alpha
        if isinstance(a, bool) or not isinstance(a, int | float) or not 0.0 < a < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {a!r}")
        t = self.target
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0.0 < t < 1.0:
            raise ValueError(f"target must be in (0, 1), got {t!r}")
        _positive_int("replicates", self.replicates)
        _positive_int("seed", self.seed, 0)
        if self.items_per_cell is not None:
            _positive_int("items_per_cell", self.items_per_cell)
        if self.n_llms is not None:
            _positive_int("n_llms", self.n_llms)
        sd = self.capability_sd
        if sd is not None and (isinstance(sd, bool) or not isinstance(sd, int | float)
                               or not math.isfinite(sd) or sd < 0):
            raise ValueError(f"capability_sd must be a number >= 0, got {sd!r}")
        if self.story_design not in STORY_DESIGNS:
            raise ValueError(f"story_design must be 'between' or 'within', got "
                             f"{self.story_design!r}"
                             + closest_hint(str(self.story_design), STORY_DESIGNS))
        if self.path not in PATHS:
            raise ValueError(f"path must be one of {PATHS}, got {self.path!r}")
        if self.correction not in CORRECTIONS:
            raise ValueError(f"correction must be 'GG', 'HF' or 'none', got "
                             f"{self.correction!r}"
                             + closest_hint(str(self.correction), CORRECTIONS))

    def replace(self, **changes: Any) -> PowerSpec:
        """Copy with some fields changed (``None`` values are ignored)."""
        kw = {k: getattr(self, k) for k in self.__dataclass_fields__}
        kw.update({k: v for k, v in changes.items() if v is not None})
        return PowerSpec(**kw)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description: the ``[power]`` table's keys, in declaration order
        (``along`` and ``by`` as ``{name: values}``; ``by`` only when set)."""
        def dimension(name: str, values: tuple[float, ...]) -> dict[str, list[Any]]:
            return {name: [int(v) if name in ALONG[:3] else v for v in values]}

        out: dict[str, Any] = {}
        for name, option in spec_options():
            value = getattr(self, name)
            if not option.table or name == "by":
                continue
            if name == "along":
                value = dimension(self.along, self.values)
            elif isinstance(value, tuple):
                value = list(value)
            elif name in ("replicates", "seed"):
                value = int(value)
            out[name] = value
        return out | ({} if self.by is None else {"by": dimension(self.by, self.by_values)})

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PowerSpec:
        """Build from the ``[power]`` table (``along = {questions_per_cell = [...]}``)."""
        known = [name for name, option in spec_options() if option.table]
        check_keys(d, known, "[power]")
        kw = {k: v for k, v in d.items() if k not in ("along", "by")}
        for key, values_key in (("along", "values"), ("by", "by_values")):
            if key not in d:
                continue
            table = d[key]
            if not isinstance(table, Mapping) or len(table) != 1:
                raise ValueError(f"[power].{key} must be a table with exactly one dimension, "
                                 f"e.g. {{questions_per_cell = [20, 50, 100]}}, got {table!r}")
            (name, values), = table.items()
            kw.update({key: name, values_key: tuple(np.atleast_1d(values).tolist())
                       if not isinstance(values, Mapping) else tuple(grid_values(values, name))})
        return cls(**kw)


def _dimension_values(field: str, name: Any, values: Any) -> tuple[float, ...]:
    """Check the values of a varied dimension (``along`` or ``by``) and return them as floats."""
    if name not in ALONG:
        raise ValueError(f"{field}: unknown dimension {name!r}" + closest_hint(str(name), ALONG))
    try:
        out = tuple(float(v) for v in np.atleast_1d(np.asarray(values, dtype=float)))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{field} {name}: values must be numbers, got {values!r}") from exc
    if not out:
        raise ValueError(f"{field} {name}: give at least one value")
    if not all(math.isfinite(v) for v in out):
        raise ValueError(f"{field} {name}: values must be finite, got {list(out)}")
    if len(set(out)) != len(out):
        raise ValueError(f"{field} {name}: values must be distinct, got {list(out)}")
    if name in ALONG[:3]:
        bad = [v for v in out if v < 1 or v != round(v)]
        if bad:
            raise ValueError(f"{field} {name}: values must be whole numbers >= 1, got "
                             f"{_fmt(bad)}")
    elif name == "sigma" and any(v < 0 for v in out):
        raise ValueError(f"{field} sigma: values must be >= 0, got {_fmt(out)}")
    return out


def _fmt(values: Sequence[float]) -> list[Any]:
    return [int(v) if float(v).is_integer() else v for v in values]


@dataclass(frozen=True)
class StudyConfig:
    """Everything a simulation study needs (the content of a simulation TOML).

    Attributes
    ----------
    design : Design
    params : Params
    replicates : int
        Monte Carlo replicates of the main design.
    seed : int
    path : {"exact", "bernoulli"}
    gamma, alpha : tuple of float
        Sensitivity grid values.
    sensitivity_capability : float
        Capability level at which the grid is simulated.
    sensitivity_replicates : int
    power : PowerSpec
        The ``[power]`` table (defaults when absent).
    """

    design: Design = field(default_factory=paper_design)
    params: Params = PAPER_PARAMS
    replicates: int = 1000
    seed: int = 0
    path: str = "exact"
    gamma: tuple[float, ...] = PAPER_GAMMA
    alpha: tuple[float, ...] = PAPER_ALPHA
    sensitivity_capability: float = 1.0
    sensitivity_replicates: int = 1000
    power: PowerSpec = field(default_factory=PowerSpec)

    def __post_init__(self) -> None:
        if not isinstance(self.design, Design):
            raise TypeError(f"design must be a tomstats.Design, got {type(self.design).__name__}")
        if not isinstance(self.params, Params):
            raise TypeError(f"params must be a tomstats.Params, got {type(self.params).__name__}")
        for name in ("replicates", "sensitivity_replicates", "seed"):
            _positive_int(name, getattr(self, name), 0 if name == "seed" else 1)
        if self.path not in PATHS:
            raise ValueError(f"path must be one of {PATHS}, got {self.path!r}")
        self.params.validate()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description."""
        return {
            "design": self.design.to_dict(),
            "params": self.params.to_dict(),
            "replicates": int(self.replicates),
            "seed": int(self.seed),
            "path": self.path,
            "sensitivity": {"gamma": list(self.gamma), "alpha": list(self.alpha),
                            "capability": self.sensitivity_capability,
                            "replicates": int(self.sensitivity_replicates)},
            "power": self.power.to_dict(),
        }


def load_study(file: str | os.PathLike[str], /, **overrides: Any) -> StudyConfig:
    """Read a simulation TOML (``[design]``, ``[parameters]``, ``[simulation]``,
    ``[sensitivity]``, ``[power]``); keyword ``overrides`` (not None) replace simulation
    settings."""
    check_type(file, (str, os.PathLike), "file", "a path to a simulation TOML")
    data = load_toml(file)
    check_keys(data, _TABLES, f"{file}: table")
    if not any(k in data for k in _TABLES if k != "meta"):
        raise ValueError(
            f"{file}: no simulation settings (none of the tables "
            f"{', '.join(f'[{t}]' for t in _TABLES if t != 'meta')}); an empty file would run "
            "the paper's defaults — use `tomstats reproduce` for that, or start from "
            "simulations/paper.toml")
    try:
        return study_from_dict(data, overrides)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{file}: {exc}") from exc


def study_from_dict(data: Mapping[str, Any], overrides: Mapping[str, Any]) -> StudyConfig:
    """A :class:`StudyConfig` from the parsed tables of a simulation TOML."""
    design = Design.from_dict(data["design"]) if "design" in data else paper_design()
    praw = dict(data.get("parameters", {}))
    check_keys(praw, _PARAM_NAMES, "[parameters]")
    for k, v in praw.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(f"[parameters].{k} must be a number, got {v!r}")
    params = PAPER_PARAMS.replace(**{k: float(v) for k, v in praw.items()})
    sim = dict(data.get("simulation", {}))
    check_keys(sim, ("replicates", "seed", "path"), "[simulation]")
    sens = dict(data.get("sensitivity", {}))
    check_keys(sens, ("gamma", "alpha", "capability", "replicates"), "[sensitivity]")
    kw: dict[str, Any] = {
        "design": design,
        "params": params,
        "replicates": sim.get("replicates", 1000),
        "seed": sim.get("seed", 0),
        "path": sim.get("path", "exact"),
        "gamma": tuple(grid_values(sens.get("gamma", list(PAPER_GAMMA)), "gamma")),
        "alpha": tuple(grid_values(sens.get("alpha", list(PAPER_ALPHA)), "alpha")),
        "sensitivity_capability": float(sens.get("capability", 1.0)),
        "sensitivity_replicates": sens.get("replicates", sim.get("replicates", 1000)),
        "power": PowerSpec.from_dict(data.get("power", {})),
    }
    for k, v in overrides.items():
        if v is not None:
            kw[k] = v
            if k == "replicates" and "replicates" not in sens:
                kw["sensitivity_replicates"] = v
    return StudyConfig(**kw)
