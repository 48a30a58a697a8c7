"""The one fit reader, :mod:`tomstats.glmm.fit_file` (issue 31, items 7, 8 and 11).

A tampered or damaged fit file is refused by every command that reads fits (``report``,
``compare``, ``calibrate``, ``simulate --posterior``, ``power --from-fit``) and by
:func:`tomstats.glmm.load_fit`, with exit 2 and one line naming the field and the value,
instead of a confident report (``beta[0] = NaN`` → "Convergence: PASS"), a calibrated
``alpha = inf``, or "internal error: KeyError 'coef'". A Hypothesis test mutates valid fits at
random: nothing but the documented refusal (:class:`FitFileError`) ever comes out.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _ml_fits import old_intercepts_dict
from _report_data import make_fit, make_formula_fit, save_fit

from tomstats.cli import main
from tomstats.glmm.fit_file import FAMILIES, JSON_FIELDS, NULLABLE, FitFileError
from tomstats.glmm.fit_reader import read_fit, read_ml_fit
from tomstats.glmm.lme_result import LaplaceFit, LmeFit, LmeTerm


def laplace_dict() -> dict[str, Any]:
    """A valid random-intercepts fit's JSON in the format of earlier versions
    (``tomstats-laplace-fit``, still read)."""
    se = np.array([0.3, 0.4, 0.5])
    return old_intercepts_dict(
        formula="correct ~ fb + implicit + (1 | model)", family="bernoulli", n_obs=64,
        coef_names=("Intercept", "fb", "implicit"), beta=np.array([1.5, -2.0, 0.1]), se=se,
        cov=np.diag(se ** 2), groups=("model",), sd=np.array([0.7]),
        levels=(("m0", "m1", "m2", "m3"),), ranef=np.array([-0.5, 0.1, 0.2, 0.2]),
        loglik=-30.0, converged=True, iterations=7, n_rows=64, aic=70.0, bic=80.0,
        separation=[])


def lme_dict() -> dict[str, Any]:
    """A valid lme4-style fit's JSON with a correlated random slope
    (:meth:`LmeFit.to_dict`): 3 θ, 2 × 3 conditional modes, 3 × 2 × 2 variances."""
    term = LmeTerm(group="model", effects=("(Intercept)", "fb"), correlated=True,
                   levels=("a", "b", "c"), expr="1 + fb")
    return LmeFit(
        formula="correct ~ fb + (1 + fb | model)", family="bernoulli", n_obs=60, n_rows=60,
        coef_names=("(Intercept)", "fb"), beta=np.array([1.0, -1.5]), se=np.array([0.2, 0.3]),
        cov=np.diag([0.04, 0.09]), se_method="hessian", terms=(term,),
        theta=np.array([0.5, 0.1, 0.3]), b=np.linspace(-0.3, 0.3, 6),
        b_var=np.tile(np.eye(2).ravel() * 0.01, 3), loglik=-35.0, converged=True,
        iterations=12, grad_norm=1e-6, hess_min_eig=0.5).to_dict()


def _dump(d: dict[str, Any]) -> str:
    return json.dumps(d, indent=2)  # allow_nan: a tampered file may hold NaN or Infinity


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], str]:
    """A tampering: set ``path`` (``"beta.0"``, ``"terms.0.correlated"``) to ``value``."""
    def tamper(d: dict[str, Any]) -> str:
        *head, last = path.split(".")
        node: Any = d
        for k in head:
            node = node[int(k)] if isinstance(node, list) else node[k]
        node[int(last) if isinstance(node, list) else last] = value
        return _dump(d)
    return tamper


def _drop(key: str) -> Callable[[dict[str, Any]], str]:
    def tamper(d: dict[str, Any]) -> str:
        del d[key]
        return _dump(d)
    return tamper


def _twice(key: str, value: Any) -> Callable[[dict[str, Any]], str]:
    """The key written a second time, before the first (the last one wins in Python)."""
    def tamper(d: dict[str, Any]) -> str:
        return "{" + f"{json.dumps(key)}: {json.dumps(value)}, " + _dump(d)[1:]
    return tamper


#: Tampered random-intercepts fits (issue 31, item 7): (tampering, what the message says).
LAPLACE_CASES: dict[str, tuple[Callable[[dict[str, Any]], str], str]] = {
    "beta[0] NaN": (_set("beta.0", math.nan), "field 'beta[0]' is nan"),
    "beta[1] Infinity": (_set("beta.1", math.inf), "field 'beta[1]' is inf"),
    "family gaussian": (_set("family", "gaussian"), "field 'family' is 'gaussian'"),
    "n_obs -5": (_set("n_obs", -5), "field 'n_obs' is -5"),
    "n_rows 2.5": (_set("n_rows", 2.5), "field 'n_rows' is 2.5"),
    "converged 'yes'": (_set("converged", "yes"), "field 'converged' is 'yes'"),
    "converged 1": (_set("converged", 1), "field 'converged' is 1"),
    "formula twice": (_twice("formula", "correct ~ 1"), "the key 'formula' appears twice"),
    "format tag 99": (_set("format", 99), "field 'format' is 99"),
    "format version 99": (_set("format_version", 99), "field 'format_version' is 99"),
    "format missing": (_drop("format"), "field 'format' is None"),
    "format version missing": (_drop("format_version"), "field 'format_version' is None"),
    "beta too short": (_set("beta", [1.0, 2.0]), "field 'beta' is '<2 values>': expected 3"),
    "cov not square": (_set("cov", [[1.0, 0.0, 0.0]] * 2), "field 'cov' is '<2 values>'"),
    "se a string": (_set("se", "0.3"), "field 'se' is '0.3'"),
    "sd negative": (_set("sd.0", -0.7), "field 'sd[0]' is -0.7"),
    "ranef too long": (_set("ranef", [0.0] * 5), "field 'ranef' is '<5 values>': expected 4"),
    "n_levels disagree": (_set("n_levels.0", 5), "field 'levels[0]' is '<4 levels>'"),
    "loglik null": (_set("loglik", None), "field 'loglik' is None"),
    "iterations true": (_set("iterations", True), "field 'iterations' is True"),
    "unknown field": (_set("betta", [0.0]), "unknown field 'betta' (did you mean 'beta'?)"),
    "missing field": (_drop("cov"), "field 'cov' is missing"),
    "group with __": (_set("groups.0", "__class__"), "'__class__': names starting with '__'"),
    "formula with code": (_set("formula", "correct ~ I(__import__('os').getpid())"),
                          "stored formula"),
}

#: Tampered lme4-style fits: the terms size θ, b and their variances.
LME_CASES: dict[str, tuple[Callable[[dict[str, Any]], str], str]] = {
    "theta too long": (_set("theta", [0.5, 0.1, 0.3, 0.2]), "field 'theta' is '<4 values>'"),
    "b_var too short": (_set("b_var", [0.01] * 6), "field 'b_var' is '<6 values>': "
                                                   "expected 12"),
    "correlated 'no'": (_set("terms.0.correlated", "no"),
                        "field 'terms[0].correlated' is 'no'"),
    "family poisson": (_set("family", "poisson"), "field 'family' is 'poisson'"),
    "singular null": (_set("singular", None), "field 'singular' is None"),
    "b[2] NaN": (_set("b.2", math.nan), "field 'b[2]' is nan"),
    "term group with __": (_set("terms.0.group", "__globals__"), "names starting with '__'"),
}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _one_line_error(err: str, command: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"tomstats {command}: error: "), err
    return lines[0]


@pytest.mark.parametrize("case", list(LAPLACE_CASES) + [f"lme: {c}" for c in LME_CASES])
def test_tampered_json_fit_is_refused_by_every_reader(
        tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    lme = case.startswith("lme: ")
    tamper, message = (LME_CASES[case[5:]] if lme else LAPLACE_CASES[case])
    good = _write(tmp_path, "good.json", _dump(lme_dict() if lme else laplace_dict()))
    bad = _write(tmp_path, "bad.json", tamper(lme_dict() if lme else laplace_dict()))
    # the library readers
    assert type(read_ml_fit(good)) is LaplaceFit and LmeFit is LaplaceFit
    with pytest.raises(FitFileError, match="bad.json") as info:
        read_ml_fit(bad)
    assert message in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ValueError, match="bad.json"):
        LaplaceFit.from_json(bad)
    # report: exit 2, one line naming the field and the value, nothing written
    out = tmp_path / "r.html"
    assert main(["report", str(bad), "--out", str(out)]) == 2
    line = _one_line_error(capsys.readouterr().err, "report")
    assert message in line and "bad.json" in line
    assert not out.exists()
    # compare
    assert main(["compare", str(good), str(bad)]) == 2
    assert message in _one_line_error(capsys.readouterr().err, "compare")
    # power --from-fit: refused before the log is read
    from tomstats.planning.from_fit import load_power_fit

    with pytest.raises(ValueError, match="bad.json") as info:
        load_power_fit(bad, tmp_path / "never-read.csv")
    assert message in str(info.value)


def test_valid_json_fits_still_report(tmp_path: Path) -> None:
    for name, d in (("lap.json", laplace_dict()), ("lme.json", lme_dict())):
        p = _write(tmp_path, name, _dump(d))
        assert main(["report", str(p), "--out", str(tmp_path / f"{name}.html")]) == 0
    # null where a value could not be computed (a singular Hessian's standard errors)
    d = laplace_dict()
    d["se"] = [None, 0.4, 0.5]
    assert read_ml_fit(_write(tmp_path, "null-se.json", _dump(d))).se[0] != 0.3


def test_schema_tables_agree_with_the_writers() -> None:
    """Every field the writers put in a fit is in the schema, and nothing else (the
    random-intercept format: the fields of a file its writer, in an earlier version, wrote)."""
    old = Path(__file__).resolve().parents[1] / "fixtures" / "fits" / "laplace_fit_v1.json"
    assert set(JSON_FIELDS["tomstats-laplace-fit"]) == set(json.loads(old.read_text()))
    assert set(JSON_FIELDS["tomstats-lme-fit"]) == set(lme_dict())
    assert NULLABLE <= set(JSON_FIELDS["tomstats-lme-fit"]) | set(
        JSON_FIELDS["tomstats-laplace-fit"])
    assert FAMILIES == ("bernoulli", "binomial")


# --------------------------------------------------------------------------- netCDF fits


def structural_glmm_fit(seed: int = 1) -> Any:
    """:func:`_report_data.make_fit` with the attributes and layout of a fit written by
    ``tomstats fit --model structural`` (format, spec, capability on ``llm``)."""
    from tomstats.glmm.spec import StructuralSpec

    idata = make_fit(seed=seed)
    idata.posterior = idata.posterior.rename({"llm_level": "llm"})
    spec = StructuralSpec(family="bernoulli", item_effects=True).to_dict()
    n = idata.observed_data["correct"].size
    idata.posterior.attrs.update({
        "tomstats_glmm_format": "1", "model_kind": "structural", "family": "bernoulli",
        "spec": json.dumps(spec), "n_obs": n, "n_rows": n, "aggregated": 0, "seed": 0})
    return idata


def _tampered_nc(tmp_path: Path, idata: Any, change: Callable[[Any], None]) -> Path:
    change(idata)
    return save_fit(idata, tmp_path / "bad.nc")


def _wrong_dim(idata: Any) -> None:
    beta = idata.posterior["beta"]
    idata.posterior["beta"] = (("chain", "draw", "term"), beta.values)


def _nan_at(var: str, value: float) -> Callable[[Any], None]:
    def change(idata: Any) -> None:
        idata.posterior[var].values[(0,) * idata.posterior[var].ndim] = value
    return change


NC_CASES: dict[str, tuple[Callable[[], Any], Callable[[Any], None], str]] = {
    "beta on the wrong dimension": (
        make_formula_fit, _wrong_dim,
        "posterior variable 'beta' is \"<dims ('chain', 'draw', 'term')>\": expected dims "
        "('chain', 'draw', 'coef')"),
    "beta NaN": (make_formula_fit, _nan_at("beta", math.nan), "posterior variable 'beta' is nan"),
    "format 99": (make_formula_fit,
                  lambda i: i.posterior.attrs.update(tomstats_glmm_format="99"),
                  "attribute 'tomstats_glmm_format' is '99'"),
    "no format": (make_formula_fit, lambda i: i.posterior.attrs.pop("tomstats_glmm_format"),
                  "no 'tomstats_glmm_format' attribute"),
    "family gaussian": (make_formula_fit, lambda i: i.posterior.attrs.update(family="gaussian"),
                        "attribute 'family' is 'gaussian'"),
    "n_obs -5": (make_formula_fit, lambda i: i.posterior.attrs.update(n_obs=-5),
                 "attribute 'n_obs' is -5"),
    "alpha NaN": (structural_glmm_fit, _nan_at("alpha", math.nan),
                  "posterior variable 'alpha' is nan"),
    "gamma inf": (structural_glmm_fit, _nan_at("gamma", math.inf),
                  "posterior variable 'gamma' is inf"),
}


@pytest.mark.parametrize("case", list(NC_CASES))
def test_tampered_netcdf_fit_is_refused(tmp_path: Path, case: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    make, change, message = NC_CASES[case]
    bad = _tampered_nc(tmp_path, make(), change)
    with pytest.raises(FitFileError) as info:
        read_fit(bad)
    assert message in str(info.value)
    from tomstats.glmm import load_fit

    with pytest.raises(ValueError, match="bad.nc"):
        load_fit(bad)
    commands = {
        "report": ["report", str(bad), "--out", str(tmp_path / "r.html")],
        "calibrate": ["calibrate", str(bad), "--out", str(tmp_path / "p.toml")],
        "compare": ["compare", f"a={bad}", f"b={bad}", "--out", str(tmp_path / "c.csv")],
    }
    for command, argv in commands.items():
        assert main(argv) == 2, command
        assert message in _one_line_error(capsys.readouterr().err, command), command
    assert not list(tmp_path.glob("r.html")) and not list(tmp_path.glob("p.toml"))
    assert not list(tmp_path.glob("c.csv"))


def test_calibrate_never_writes_non_finite_parameters(tmp_path: Path) -> None:
    """Item 8: a NaN or inf posterior held in memory (past the file reader) is still not
    written into a simulation file."""
    from tomstats.glmm.calibrate import write_params

    for value, shown in ((math.inf, "inf"), (math.nan, "nan")):
        idata = structural_glmm_fit()
        idata.posterior["alpha"].values[:] = value
        for suffix in (".toml", ".json"):
            out = tmp_path / f"p{suffix}"
            with pytest.raises(ValueError, match=f"alpha is {shown}, not a finite number"):
                write_params(idata, out)
            assert not out.exists()


def test_calibrate_of_a_sound_structural_fit_still_works(tmp_path: Path) -> None:
    fit = save_fit(structural_glmm_fit(), tmp_path / "fit.nc")
    assert main(["calibrate", str(fit), "--out", str(tmp_path / "p.toml")]) == 0
    text = (tmp_path / "p.toml").read_text()
    assert "alpha = " in text and "nan" not in text and "inf" not in text


def test_simulate_posterior_of_a_nan_fit_is_refused(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    bad = _tampered_nc(tmp_path, structural_glmm_fit(), _nan_at("alpha", math.nan))
    toml = Path(__file__).resolve().parents[2] / "simulations" / "paper.toml"
    out = tmp_path / "sim"
    assert main(["simulate", str(toml), "--posterior", str(bad), "--draws", "4", "--out",
                 str(out), "--quiet"]) == 2
    assert "posterior variable 'alpha' is nan" in capsys.readouterr().err
    assert not out.exists()


def test_a_foreign_inferencedata_is_not_reported(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``report`` used to read any InferenceData, whatever its format tag (or none)."""
    foreign = save_fit(make_fit(seed=1), tmp_path / "foreign.nc")
    assert main(["report", str(foreign), "--out", str(tmp_path / "r.html")]) == 2
    assert "no 'tomstats_glmm_format' attribute" in capsys.readouterr().err


# --------------------------------------------------------------------------- fuzzing

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

_JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                       st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12))
_JSON = st.recursive(_JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


@st.composite
def _mutated(draw: Any) -> str:
    """A valid fit with one to three of: a value replaced by any JSON value, a key removed,
    a key added; or a raw text edit of the file."""
    d = copy.deepcopy(draw(st.sampled_from([laplace_dict(), lme_dict()])))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(d)
        path = draw(st.sampled_from(paths))
        parent: Any = d
        for k in path[:-1]:
            parent = parent[k]
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "replace" or isinstance(parent, list):
            parent[path[-1]] = draw(_JSON)
        elif action == "remove":
            del parent[path[-1]]
        else:
            parent[draw(st.text(max_size=8))] = draw(_JSON)
    text = json.dumps(d)
    if draw(st.booleans()):  # a raw edit: cut, or a byte changed
        i = draw(st.integers(0, len(text)))
        text = text[:i] + draw(st.sampled_from(["", "x", "{", "]", '"', "NaN", "\\u0000"])) \
            + text[i + draw(st.integers(0, 3)):]
    return text


@hypothesis.settings(max_examples=300, deadline=None,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(text=_mutated())
def test_fuzzed_fits_are_read_or_refused_in_one_line(tmp_path_factory: Any, text: str) -> None:
    """Property: a mutated fit file is either read as a fit whose arrays are finite, of the
    declared shapes, or refused with :class:`FitFileError` in one line; never another
    exception."""
    p = tmp_path_factory.mktemp("fuzz") / "fit.json"
    p.write_text(text, encoding="utf-8")
    try:
        fit = read_ml_fit(p)
    except FitFileError as exc:
        msg = str(exc)
        assert msg.startswith(repr(str(p))) and "\n" not in msg, msg
        return
    assert np.isfinite(fit.beta).all() and fit.beta.shape == (len(fit.coef_names),)
    assert fit.cov.shape == (len(fit.coef_names),) * 2
    assert fit.family in FAMILIES and isinstance(fit.converged, bool)
    assert fit.n_obs >= 0 and fit.n_rows >= 0 and math.isfinite(fit.loglik)
    str(fit)  # the summary prints
