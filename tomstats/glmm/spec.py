"""Backend-neutral model specifications: priors, the structural spec and the formula spec.

A spec is a frozen dataclass that says *what* model to fit (likelihood family, terms,
priors, parametrisation); a backend (:mod:`tomstats.glmm.numpyro_backend`,
:mod:`tomstats.glmm.pymc_backend`) turns it, together with the numeric design built by
:mod:`tomstats.glmm.design`, into a sampler. Specs serialise to JSON (stored in the
attributes of every fit), so a fit can be rebuilt and re-run from its netCDF file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tomstats._expr import check_column, check_formula, check_group, check_terms
from tomstats._validate import loads_unique

__all__ = [
    "Prior",
    "normal",
    "half_normal",
    "student_t",
    "half_student_t",
    "exponential",
    "lkj",
    "StructuralSpec",
    "FormulaSpec",
    "RandomTerm",
    "DEFAULT_STRUCTURAL_PRIORS",
    "parse_formula",
    "spec_from_json",
    "check_stored_formula",
]

_PRIOR_PARAMS: dict[str, tuple[str, ...]] = {
    "normal": ("loc", "scale"),
    "half_normal": ("scale",),
    "student_t": ("df", "loc", "scale"),
    "half_student_t": ("df", "scale"),
    "exponential": ("rate",),
    "lkj": ("eta",),
}
_POSITIVE = {"half_normal", "half_student_t", "exponential"}


@dataclass(frozen=True)
class Prior:
    """A prior distribution, described independently of any backend.

    Parameters
    ----------
    dist : {"normal", "half_normal", "student_t", "half_student_t", "exponential", "lkj"}
        Distribution family. Densities (``s`` = scale):
        Normal(loc, s); HalfNormal(s) on x > 0; StudentT(df, loc, s); HalfStudentT(df, s)
        on x > 0; Exponential(rate); LKJ(eta) on correlation matrices.
    params : tuple of (name, value)
        Parameter values; use the helper constructors (:func:`normal`, ...) instead.
    """

    dist: str
    params: tuple[tuple[str, float], ...]

    def __post_init__(self) -> None:
        if self.dist not in _PRIOR_PARAMS:
            raise ValueError(f"prior: unknown distribution {self.dist!r}; "
                             f"choose one of {sorted(_PRIOR_PARAMS)}")
        names = tuple(k for k, _ in self.params)
        if sorted(names) != sorted(_PRIOR_PARAMS[self.dist]):
            raise ValueError(f"prior {self.dist!r}: expected parameters "
                             f"{_PRIOR_PARAMS[self.dist]}, got {names}")
        for k, v in self.params:
            if not isinstance(v, (int, float)) or v != v or abs(v) == float("inf"):
                raise ValueError(f"prior {self.dist!r}: parameter {k!r} must be a finite "
                                 f"number, got {v!r}")
            if k in ("scale", "df", "rate", "eta") and v <= 0:
                raise ValueError(f"prior {self.dist!r}: parameter {k!r} must be > 0, got {v!r}")
        object.__setattr__(self, "params", tuple((k, float(v)) for k, v in self.params))

    def __getitem__(self, name: str) -> float:
        return dict(self.params)[name]

    @property
    def positive(self) -> bool:
        """Whether the support is the positive half-line."""
        return self.dist in _POSITIVE

    def to_dict(self) -> dict[str, Any]:
        """``{"dist": ..., <param>: value, ...}``."""
        return {"dist": self.dist, **dict(self.params)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Prior:
        """Inverse of :meth:`to_dict`."""
        d = dict(d)
        dist = d.pop("dist")
        return cls(dist, tuple((k, float(v)) for k, v in d.items()))

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v:g}" for k, v in self.params)
        return f"{self.dist}({args})"


def normal(loc: float = 0.0, scale: float = 1.0) -> Prior:
    """Normal(loc, scale) prior."""
    return Prior("normal", (("loc", loc), ("scale", scale)))


def half_normal(scale: float = 1.0) -> Prior:
    """HalfNormal(scale) prior on x > 0."""
    return Prior("half_normal", (("scale", scale),))


def student_t(df: float, loc: float = 0.0, scale: float = 1.0) -> Prior:
    """Student-t(df, loc, scale) prior."""
    return Prior("student_t", (("df", df), ("loc", loc), ("scale", scale)))


def half_student_t(df: float, scale: float = 1.0) -> Prior:
    """Half-Student-t(df, scale) prior on x > 0."""
    return Prior("half_student_t", (("df", df), ("scale", scale)))


def exponential(rate: float = 1.0) -> Prior:
    """Exponential(rate) prior on x > 0."""
    return Prior("exponential", (("rate", rate),))


def lkj(eta: float = 2.0) -> Prior:
    """LKJ(eta) prior on a correlation matrix (eta = 1: uniform; larger: nearer identity)."""
    return Prior("lkj", (("eta", eta),))


def _priors_tuple(priors: Mapping[str, Prior]) -> tuple[tuple[str, Prior], ...]:
    out = []
    for k, v in priors.items():
        if isinstance(v, Mapping):
            v = Prior.from_dict(v)
        if not isinstance(v, Prior):
            raise ValueError(f"priors[{k!r}] must be a tomstats.glmm.Prior, got {v!r}")
        out.append((str(k), v))
    return tuple(sorted(out, key=lambda kv: kv[0]))


# --------------------------------------------------------------------------- structural

#: Default priors of the structural model (on the sampled scale; see StructuralSpec for the
#: reasoning). With the default scales 1e-4, ``alpha_scaled`` and ``delta_scaled`` are in
#: logits at the paper's longest context (5000 words): one unit of ``alpha_scaled`` lowers
#: logit p by 1.2 there, one unit of ``delta_scaled`` by 0.5 per ToM order (1 at order 2).
DEFAULT_STRUCTURAL_PRIORS: dict[str, Prior] = {
    "capability_mu": normal(1.0, 1.0),
    "capability_sd": half_normal(1.0),
    "alpha_scaled": normal(0.0, 5.0),
    "gamma": normal(0.0, 2.0),
    "delta_scaled": normal(0.0, 15.0),
    "sigma_item": half_normal(1.0),
    "sd_gamma_llm": half_normal(0.5),
    "sd_alpha_llm_scaled": half_normal(1.0),
}
_SLOPES = ("tom_order", "context")
_NC_PARTS = ("capability", "item", "slopes")


def _nc_tuple(value: Any, parts: tuple[str, ...]) -> tuple[str, ...]:
    """``True`` → all parts, ``False`` → none, or a validated subset of ``parts``."""
    if value is True:
        return parts
    if value is False or value is None:
        return ()
    if isinstance(value, str):
        value = (value,)
    value = tuple(value)
    bad = [v for v in value if v not in parts]
    if bad:
        raise ValueError(f"noncentered: unknown part(s) {bad}; choose from {list(parts)} "
                         f"(or True / False)")
    return tuple(p for p in parts if p in value)
_FIXABLE = ("alpha", "gamma", "delta")


@dataclass(frozen=True)
class StructuralSpec:
    r"""Equation (1) of the simulation paper as a Bayesian GLMM.

    For observation :math:`i` (LLM :math:`j`, item :math:`k`, context :math:`c_i` words,
    ToM order :math:`t_i`, :math:`n_i` trials; :math:`n_i = 1` for Bernoulli rows)

    .. math::

        y_i &\sim \operatorname{Binomial}(n_i, \operatorname{logit}^{-1}\eta_i),\\
        \eta_i &= \beta_0 m_j - \alpha_j\, c_i \ln(1 + c_i/500) - \gamma_j t_i
                 - \delta\, c_i t_i + u_k,

    with :math:`\beta_0=\ln(0.85/0.15)` fixed, computed by :func:`tomstats.model.linear_predictor`.
    Priors (defaults in :data:`DEFAULT_STRUCTURAL_PRIORS`, all overridable via ``priors``):

    - capabilities, hierarchical and non-centred: :math:`m_j = \mu_m + \tau_m z_j`,
      :math:`z_j\sim N(0,1)`, :math:`\mu_m\sim N(1, 1)`, :math:`\tau_m\sim N^+(1)`
      (with ``hierarchical=False`` or one LLM: :math:`m_j\sim N(1,1)` independently);
    - :math:`\alpha = 10^{-4}\,\tilde\alpha`, :math:`\tilde\alpha\sim N(0, 5^2)` (so
      :math:`\alpha\sim N(0, (5\cdot10^{-4})^2)` per word);
      :math:`\gamma\sim N(0, 2^2)` (logit per order);
      :math:`\delta = 10^{-4}\,\tilde\delta`, :math:`\tilde\delta\sim N(0, 15^2)`;
    - item intercepts :math:`u_k = \sigma_{item} z_k`, :math:`z_k\sim N(0,1)`,
      :math:`\sigma_{item}\sim N^+(1)` (the simulator's per-question :math:`\sigma`);
    - optional per-LLM slopes: :math:`\gamma_j = \gamma + \tau_\gamma z^\gamma_j`,
      :math:`\tau_\gamma\sim N^+(0.5)`; :math:`\alpha_j = \alpha + 10^{-4}\tau_\alpha z^\alpha_j`,
      :math:`\tau_\alpha\sim N^+(1)`.

    Why these scales: the scaled parameters are in logits at the paper's longest context,
    :math:`c = 5000` words (:math:`c\ln(1+c/500) = 1.2\cdot10^4`, :math:`c\,t = 10^4` at
    order 2), so :math:`\tilde\alpha = 1` lowers logit p by 1.2 there and
    :math:`\tilde\delta = 1` by 1 at order 2. The paper's values
    (:data:`tomstats.simulation.paper.PAPER_PARAMS`: :math:`\tilde\alpha = 0.70`,
    :math:`\gamma = 1.18`, :math:`\tilde\delta = 2.3`) sit at 0.14, 0.59 and 0.15 prior
    sd, and effects ten times larger (:math:`\tilde\alpha = 7`, :math:`\tilde\delta =
    23`) at 1.4 and 1.5 sd, so the priors do not pull realistic effects towards 0; they
    only rule out penalties of several tens of logits. (The earlier
    :math:`\tilde\delta\sim N(0, 1)` put the paper's δ at 2.3 sd and shrank it to ~40 %
    in the recovery study; see ``docs/glmm-real-data.md``.) The capability prior
    :math:`N(1, 1)` gives the intercept :math:`\beta_0 m` a prior sd of 1.7 logits around
    85 % accuracy; :math:`\sigma_{item}\sim N^+(1)` allows item spreads up to ~2 logits.

    Attributes
    ----------
    family : {"bernoulli", "binomial"}
        Likelihood of the data rows (aggregated rows are always binomial).
    item_effects : bool
        Include the item random intercepts :math:`u_k`.
    hierarchical : bool
        Capabilities drawn from a common population (:math:`\mu_m, \tau_m`) or, when
        False, independent :math:`m_j\sim N(1, 1)` (the ``capability_mu`` prior), as fixed
        effects. ``fit``'s default ``"auto"`` pools when there are at least 5 LLMs: the
        population sd of fewer LLMs is mostly prior, and its funnel makes NUTS diverge.
    random_slopes : tuple of {"tom_order", "context"}
        Per-LLM deviations of :math:`\gamma` and/or :math:`\alpha`.
    noncentered : bool or tuple of {"capability", "item", "slopes"}
        Which random effects are non-centred: ``True`` (default) all, ``False`` none
        (:math:`m_j`, :math:`u_k` and the slopes sampled directly), or a subset. Stored as
        the tuple of non-centred parts.
    fixed : tuple of (name, value)
        Parameters among ``alpha, gamma, delta`` held at a value instead of estimated (e.g.
        ``alpha = delta = 0`` when the data have one context length).
    priors : tuple of (name, Prior)
        Priors on the sampled scale, keyed as in :data:`DEFAULT_STRUCTURAL_PRIORS`.
    alpha_scale, delta_scale : float
        :math:`\alpha = \text{alpha\_scale}\cdot\tilde\alpha` (same for :math:`\delta`).
    aggregate : bool
        Rows with identical covariates are summed into binomial cells before fitting.
    """

    family: str = "bernoulli"
    item_effects: bool = True
    hierarchical: bool = True
    random_slopes: tuple[str, ...] = ()
    noncentered: Any = True
    fixed: tuple[tuple[str, float], ...] = ()
    priors: tuple[tuple[str, Prior], ...] = field(
        default_factory=lambda: _priors_tuple(DEFAULT_STRUCTURAL_PRIORS))
    alpha_scale: float = 1e-4
    delta_scale: float = 1e-4
    aggregate: bool = False
    kind: ClassVar[str] = "structural"

    def __post_init__(self) -> None:
        if self.family not in ("bernoulli", "binomial"):
            raise ValueError(f"family must be 'bernoulli' or 'binomial', got {self.family!r}")
        bad = [s for s in self.random_slopes if s not in _SLOPES]
        if bad:
            raise ValueError(f"random_slopes: unknown slope(s) {bad}; choose from {_SLOPES}")
        object.__setattr__(self, "random_slopes", tuple(dict.fromkeys(self.random_slopes)))
        object.__setattr__(self, "noncentered", _nc_tuple(self.noncentered, _NC_PARTS))
        fixed = dict(self.fixed)
        bad = [k for k in fixed if k not in _FIXABLE]
        if bad:
            raise ValueError(f"fixed: cannot fix {bad}; only {_FIXABLE} can be fixed")
        object.__setattr__(self, "fixed", tuple(sorted((k, float(v)) for k, v in fixed.items())))
        pri = dict(_priors_tuple(DEFAULT_STRUCTURAL_PRIORS))
        given = dict(_priors_tuple(dict(self.priors)))
        bad = [k for k in given if k not in pri]
        if bad:
            raise ValueError(f"priors: unknown structural prior name(s) {bad}; "
                             f"known: {sorted(pri)}")
        pri.update(given)
        for k, p in pri.items():
            if p.dist == "lkj":
                raise ValueError(f"priors[{k!r}]: an LKJ prior is for correlation matrices")
            if k.startswith(("sd_", "capability_sd", "sigma_")) and not p.positive:
                raise ValueError(f"priors[{k!r}]: a scale needs a positive prior "
                                 f"(half_normal, half_student_t, exponential), got {p}")
        object.__setattr__(self, "priors", _priors_tuple(pri))
        for name in ("alpha_scale", "delta_scale"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v > 0):
                raise ValueError(f"{name} must be a positive number, got {v!r}")

    def prior(self, name: str) -> Prior:
        """The prior called ``name``."""
        return dict(self.priors)[name]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (``kind`` included)."""
        return {
            "kind": self.kind,
            "family": self.family,
            "item_effects": self.item_effects,
            "hierarchical": self.hierarchical,
            "random_slopes": list(self.random_slopes),
            "noncentered": list(self.noncentered),
            "fixed": dict(self.fixed),
            "priors": {k: p.to_dict() for k, p in self.priors},
            "alpha_scale": self.alpha_scale,
            "delta_scale": self.delta_scale,
            "aggregate": self.aggregate,
        }


# --------------------------------------------------------------------------- formula


@dataclass(frozen=True)
class RandomTerm:
    """One lme4-style random-effect term ``(expr | group)`` or ``(expr || group)``.

    Attributes
    ----------
    expr : str
        Formula of the varying effects (``"1"``, ``"1 + x"``, ``"0 + x"``...); an intercept
        is implied unless removed with ``0 +`` / ``- 1``, as in lme4.
    group : str
        Grouping column, or ``"g1:g2"`` for the interaction of two columns.
    correlated : bool
        ``|`` (True): correlated effects with an LKJ prior; ``||`` (False): independent.
    key : str
        Unique name used in variable names (``sd_<key>``, ``re_<key>``, ``z_<key>``...).
    """

    expr: str
    group: str
    correlated: bool = True
    key: str = ""

    @property
    def dim(self) -> str:
        """Name of the dimension that holds the group's levels."""
        return self.group.replace(":", "__")

    @property
    def label(self) -> str:
        """The term as written (normalised)."""
        bar = "|" if self.correlated else "||"
        return f"({self.expr} {bar} {self.group})"


@dataclass(frozen=True)
class FormulaSpec:
    r"""An lme4-style GLMM: ``response ~ fixed + (expr | group) + ...``.

    .. math::

        y_i \sim \operatorname{Binomial}(n_i, \operatorname{logit}^{-1}\eta_i),\qquad
        \eta_i = x_i^\top\beta + \sum_k z_{ik}^\top b_{k, g_k(i)}

    - fixed effects :math:`\beta` with design :math:`x_i` from ``formulaic``; with an
      intercept the predictors are centred while sampling (the intercept prior applies to
      the intercept at the predictors' means, as in brms) and :math:`\beta` is reported on
      the original scale. Default priors: centred intercept :math:`N(0, 2.5)`, slopes
      :math:`N(0, 2.5/\mathrm{sd}(x))` (rstanarm-style autoscaling);
    - random effects per term :math:`k` with :math:`d_k` effects:
      :math:`b_{k,g} = \operatorname{diag}(\tau_k) L_k z_{k,g}`, :math:`z\sim N(0, I)`,
      :math:`\tau_k\sim N^+(1)`, :math:`L_k L_k^\top = \Omega_k \sim \mathrm{LKJ}(2)`
      (correlated ``|`` terms with :math:`d_k>1`) or :math:`L_k = I` (``||`` terms and
      :math:`d_k=1`).

    Attributes
    ----------
    formula : str
        The formula as given.
    response : str
        Column of successes (or the 0/1 outcome).
    trials : str or None
        Column of trials (binomial), from ``y | trials(n) ~ ...`` or the ``trials=`` option.
    family : {"bernoulli", "binomial"}
    fixed : str
        Right-hand side of the fixed part (formulaic syntax).
    random : tuple of RandomTerm
    priors : tuple of (name, Prior)
        ``"Intercept"``, ``"beta"`` (default for every slope), a coefficient name (e.g.
        ``"tom_order"``), ``"sd_<key>"``, ``"lkj_<key>"``. Slope priors not given are
        autoscaled from the data (recorded in the fit's attributes).
    noncentered : bool or tuple of str
        Non-centred terms: ``True`` (default) all, ``False`` none, or a tuple of term keys
        (e.g. ``("item",)``). Stored as the tuple of non-centred keys.
    aggregate : bool
        As in :class:`StructuralSpec`.
    center : bool
        Centre the fixed predictors while sampling (default True).
    """

    formula: str
    response: str
    trials: str | None = None
    family: str = "bernoulli"
    fixed: str = "1"
    random: tuple[RandomTerm, ...] = ()
    priors: tuple[tuple[str, Prior], ...] = ()
    noncentered: Any = True
    center: bool = True
    aggregate: bool = False
    kind: ClassVar[str] = "formula"

    def __post_init__(self) -> None:
        if self.family not in ("bernoulli", "binomial"):
            raise ValueError(f"family must be 'bernoulli' or 'binomial', got {self.family!r}")
        if self.family == "binomial" and not self.trials:
            from tomstats.glmm._hints import InputError, hint

            family = hint("family='binomial'", "--family binomial")
            trials = hint("trials='<column>'", "--trials COLUMN")
            raise InputError(f"{family} needs a trials column: write 'successes | trials(n) ~ "
                             f"...' or pass {trials}")
        object.__setattr__(self, "priors", _priors_tuple(dict(self.priors)))
        object.__setattr__(self, "noncentered",
                           _nc_tuple(self.noncentered, tuple(t.key for t in self.random)))

    def prior(self, name: str, default: Prior | None = None) -> Prior | None:
        """The prior called ``name`` (or ``default``)."""
        return dict(self.priors).get(name, default)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (``kind`` included)."""
        return {
            "kind": self.kind,
            "formula": self.formula,
            "response": self.response,
            "trials": self.trials,
            "family": self.family,
            "fixed": self.fixed,
            "random": [{"expr": t.expr, "group": t.group, "correlated": t.correlated,
                        "key": t.key} for t in self.random],
            "priors": {k: p.to_dict() for k, p in self.priors},
            "noncentered": list(self.noncentered),
            "center": self.center,
            "aggregate": self.aggregate,
        }


def _nc_from_json(value: Any) -> Any:
    """``noncentered`` as stored: a list of parts, or the boolean of earlier versions."""
    if isinstance(value, bool) or value is None:
        return bool(value)
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(value)
    raise ValueError(f"spec: field 'noncentered' must be a list of parts or true/false, got "
                     f"{value!r}")


def spec_from_json(text: str | Mapping[str, Any]) -> StructuralSpec | FormulaSpec:
    """Rebuild a spec from :meth:`to_dict` output (or its JSON text).

    Specs written by earlier versions load too: ``noncentered`` stored as a boolean
    (``true`` = every random effect non-centred) and a missing ``hierarchical``
    (structural; earlier fits always pooled the capabilities), ``aggregate`` or
    ``center``. Anything else malformed raises ``ValueError`` naming the field.
    """
    try:
        d = dict(loads_unique(text) if isinstance(text, str) else text)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"spec: not a JSON object: {exc}") from exc
    kind = d.pop("kind", None)
    try:
        priors = tuple((k, Prior.from_dict(v)) for k, v in d.pop("priors", {}).items())
        if kind == "structural":
            return StructuralSpec(
                family=d["family"], item_effects=bool(d["item_effects"]),
                hierarchical=bool(d.get("hierarchical", True)),
                random_slopes=tuple(d.get("random_slopes", ())),
                noncentered=_nc_from_json(d.get("noncentered", True)),
                fixed=tuple(dict(d.get("fixed", {})).items()), priors=priors,
                alpha_scale=float(d.get("alpha_scale", 1e-4)),
                delta_scale=float(d.get("delta_scale", 1e-4)),
                aggregate=bool(d.get("aggregate", False)))
        if kind == "formula":
            check_stored_formula(d)
            return FormulaSpec(
                formula=d["formula"], response=d["response"], trials=d.get("trials"),
                family=d["family"], fixed=d["fixed"],
                random=tuple(RandomTerm(**t) for t in d["random"]), priors=priors,
                noncentered=_nc_from_json(d.get("noncentered", True)),
                center=bool(d.get("center", True)), aggregate=bool(d.get("aggregate", False)))
    except KeyError as exc:
        raise ValueError(f"spec: the stored {kind} spec lacks the field {exc.args[0]!r}; it "
                         f"was not written by tomstats.glmm (or is damaged)") from exc
    except TypeError as exc:
        raise ValueError(f"spec: cannot rebuild the stored {kind} spec: {exc}") from exc
    raise ValueError(f"spec: unknown model kind {kind!r} (expected 'structural' or 'formula')")


def check_stored_formula(d: Mapping[str, Any]) -> None:
    """Check a stored formula spec's text parts with the parser of a user's formula.

    A fit file is shared like a script: its formula, fixed part, random terms and column
    names are re-read by :mod:`tomstats._expr` before anything is built from them, with the
    same language and the same resource bounds as a ``--model`` (``^ n`` within the factors
    it raises, at most :data:`~tomstats._expr.MAX_TERMS` terms, constants finite and at most
    :data:`~tomstats._expr.MAX_CONSTANT`). Every reader of a fit file calls this (or
    :func:`tomstats._expr.check_formula` on a stored formula string) before rebuilding a
    design.

    Raises
    ------
    ValueError
        (:class:`tomstats._expr.ExpressionError`) naming the stored field and the piece.
    """
    field = "the fit file's stored {}"
    check_formula(d["formula"], field.format("formula"))
    check_terms(d["fixed"], field.format("fixed part"))
    check_column(d["response"], field.format("response"))
    if d.get("trials") is not None:
        check_column(d["trials"], field.format("trials column"))
    for t in d["random"]:
        if not isinstance(t, Mapping):
            raise ValueError(f"spec: a stored random term must be an object, got {t!r}")
        check_terms(t["expr"], field.format("random term"))
        check_group(t["group"], field.format("grouping factor"))


# --------------------------------------------------------------------------- parsing


def _split_top(text: str, sep: str) -> list[str]:
    """Split ``text`` on ``sep`` outside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise ValueError(f"formula: unbalanced ')' in {text!r}")
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise ValueError(f"formula: unbalanced '(' in {text!r}")
    parts.append("".join(cur))
    return [p.strip() for p in parts]


_TRIALS = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\|\s*trials\(\s*([A-Za-z_][A-Za-z0-9_.]*)"
                     r"\s*\)\s*$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def parse_formula(formula: str) -> tuple[str, str | None, str, tuple[RandomTerm, ...]]:
    """Split an lme4-style formula into response, trials, fixed part and random terms.

    ``"correct ~ tom_order * log_context + (1 | model) + (1 | item)"`` gives
    ``("correct", None, "tom_order * log_context", (RandomTerm("1", "model"), RandomTerm("1",
    "item")))``. The left-hand side is a column name, or ``successes | trials(n)`` for
    binomial counts. Random terms are ``(expr | g)`` (correlated), ``(expr || g)``
    (independent), with ``g`` a column, ``g1:g2`` (interaction) or ``g1/g2`` (nesting,
    expanded to ``g1`` and ``g1:g2``).

    Returns
    -------
    response, trials, fixed, random
    """
    if not isinstance(formula, str) or formula.count("~") != 1:
        raise ValueError(f"formula must be a string 'response ~ terms', got {formula!r}")
    check_formula(formula)  # the formula language; nothing else reaches the formula engine
    lhs, rhs = (s.strip() for s in formula.split("~"))
    m = _TRIALS.match(lhs)
    if m:
        response, trials = m.group(1), m.group(2)
    elif _NAME.match(lhs):
        response, trials = lhs, None
    else:
        raise ValueError(f"formula: the left-hand side must be a column name or "
                         f"'successes | trials(n)', got {lhs!r}")
    if not rhs:
        raise ValueError(f"formula {formula!r} has an empty right-hand side")
    fixed_parts: list[str] = []
    random: list[RandomTerm] = []
    for term in _split_top(rhs, "+"):
        if not term:
            raise ValueError(f"formula {formula!r}: empty term (a stray '+')")
        inner = term[1:-1] if term.startswith("(") and term.endswith(")") else None
        if inner is not None and "|" in inner and len(_split_top(inner, "|")) > 1:
            pieces = _split_top(inner, "|")
            if len(pieces) == 2:
                expr, group, corr = pieces[0], pieces[1], True
            elif len(pieces) == 3 and pieces[1] == "":
                expr, group, corr = pieces[0], pieces[2], False
            else:
                raise ValueError(f"formula: cannot parse random term {term!r}")
            if not expr:
                raise ValueError(f"formula: random term {term!r} has no effects before '|'")
            groups = [g.strip() for g in group.split("/")]
            if not all(all(_NAME.match(p.strip()) for p in g.split(":")) for g in groups):
                raise ValueError(f"formula: the grouping factor of {term!r} must be a column "
                                 f"name (or g1:g2, g1/g2), got {group!r}")
            for i in range(len(groups)):
                g = ":".join(p.strip() for gg in groups[: i + 1] for p in gg.split(":"))
                random.append(RandomTerm(expr=" ".join(expr.split()), group=g, correlated=corr))
        else:
            fixed_parts.append(term)
    fixed = " + ".join(fixed_parts) if fixed_parts else "1"
    # unique keys for variable names
    keyed: list[RandomTerm] = []
    seen: dict[str, int] = {}
    for t in random:
        base = t.dim
        seen[base] = seen.get(base, 0) + 1
        key = base if seen[base] == 1 else f"{base}_{seen[base]}"
        keyed.append(RandomTerm(t.expr, t.group, t.correlated, key))
    return response, trials, fixed, tuple(keyed)
