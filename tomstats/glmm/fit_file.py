"""The schema of fit files and their checked reading: every command that takes a fit
(``report``, ``compare``, ``calibrate``, ``simulate --posterior``, ``power --from-fit``) and
:func:`tomstats.glmm.load_fit` read it here (as objects through
:mod:`tomstats.glmm.fit_reader`), and every fit is checked completely against its schema
before anything is computed from it.

A fit file is shared like a script, so it is read as hostile input. Two kinds exist:

- **maximum-likelihood fits** (``tomstats fit --backend laplace``): JSON with
  ``"format": "tomstats-lme-fit"`` (every fit, :class:`~tomstats.glmm.lme_result.LaplaceFit`)
  or ``"tomstats-laplace-fit"`` (random intercepts, written by earlier versions; read into
  the same type), ``"format_version": 1``;
- **sampler fits** (``tomstats fit``): an ArviZ InferenceData in netCDF whose posterior
  carries ``tomstats_glmm_format = "1"``.

What is checked (:data:`JSON_FIELDS` is the schema of the JSON fits):

- the format tag and its version;
- a JSON object holding a key twice (``"formula"`` twice: readers disagree on which counts);
- every field present, of its type, and no unknown field: strings are strings, counts
  (``n_obs``, ``n_rows``, ``iterations``, ``n_levels``) whole numbers ≥ 0, booleans
  (``converged``, ``singular``, ``aggregated``, ``correlated``) JSON ``true``/``false``
  (``"yes"`` or ``1`` refused);
- ``family`` one of :data:`FAMILIES` (the logit GLMM's likelihoods);
- arrays of the shape the fit declares (``beta``, ``se``: one per coefficient name; ``cov``:
  p × p; ``sd``: one per group; ``ranef``: the sum of ``n_levels``; ``theta``, ``b``,
  ``b_var``: as the terms' sizes give them), every number finite (``NaN`` and ``Infinity``
  are not JSON; tomstats writes a value it could not compute as ``null``, allowed only in
  the fields of :data:`NULLABLE`); ``sd`` ≥ 0;
- the stored formula, random terms and grouping factors, re-read by the formula language
  (:func:`tomstats._expr.check_formula`) before any design is rebuilt from them;
- for a netCDF fit: the format attribute, the spec (its formula re-read the same way), the
  family, the counts ``n_obs``/``n_rows``, every posterior variable on ``(chain, draw, …)``
  with the dimensions its spec declares (``beta`` on ``coef``), finite, and the observed
  counts ``0 ≤ y ≤ trials`` with as many observations as ``n_obs``.

A file that fails a check is refused with one line naming the file, the field and the value
(:class:`FitFileError`, a ``ValueError``: exit 2 on the command line).
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tomstats._validate import DuplicateKeyError, closest_hint, read_text, unique_pairs
from tomstats.glmm._hints import InputError
from tomstats.glmm._theta import n_theta

__all__ = ["FAMILIES", "FORMAT_KEY", "FORMAT_VERSION", "JSON_FIELDS", "ML_FORMATS", "NULLABLE",
           "FitFileError", "check_ml_dict", "check_netcdf_fit", "fit_dims", "is_ml_fit",
           "is_netcdf", "load_ml_dict", "netcdf_engine", "open_netcdf", "read_fit_json",
           "read_netcdf_fit"]

#: JSON formats of maximum-likelihood fits (the random-intercept one of earlier versions; the
#: one written now).
ML_FORMATS = ("tomstats-laplace-fit", "tomstats-lme-fit")
#: The format version of both JSON formats this tomstats reads.
JSON_FORMAT_VERSION = 1
#: Likelihoods of the logit GLMM (``family`` of every fit).
FAMILIES = ("bernoulli", "binomial")
#: Fields that may hold ``null``: values a fit could not compute (a singular Hessian's
#: standard errors, the information criteria of a fit that did not converge).
NULLABLE = frozenset({"se", "cov", "aic", "bic", "b_var", "grad_norm", "hess_min_eig",
                      "pearson"})
_FLOAT_MAX = sys.float_info.max
#: Largest JSON fit read (bytes): a fit of a million coefficients is far below it.
MAX_JSON_BYTES = 256 * 2**20


class FitFileError(InputError):
    """A fit file that is not what it claims: one line naming the file, field and value."""


# --------------------------------------------------------------------------- field checks

_Check = Callable[[Any, str, dict[str, Any]], None]


def _bad(field: str, value: Any, problem: str) -> ValueError:
    """``field 'beta[0]' is nan: problem``."""
    return _refused(f"field {field!r}", value, problem)


def _refused(what: str, value: Any, problem: str) -> ValueError:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return ValueError(f"{what} is {shown}: {problem}")


def _string(v: Any, f: str, _: dict[str, Any]) -> None:
    if not isinstance(v, str):
        raise _bad(f, v, "expected a string")


def _boolean(v: Any, f: str, _: dict[str, Any]) -> None:
    if not isinstance(v, bool):
        raise _bad(f, v, "expected true or false (a JSON boolean)")


def _count(v: Any, f: str, _: dict[str, Any]) -> None:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _bad(f, v, "expected a whole number")
    if v < 0:
        raise _bad(f, v, "a count cannot be negative")


def _strings(v: Any, f: str, _: dict[str, Any]) -> None:
    if not isinstance(v, list):
        raise _bad(f, v, "expected a list of strings")
    for i, s in enumerate(v):
        _string(s, f"{f}[{i}]", _)


def _number(v: Any, f: str, nullable: bool) -> None:
    if v is None and nullable:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _bad(f, v, "expected a number" + (" or null" if nullable else ""))
    if isinstance(v, int) and abs(v) > _FLOAT_MAX:
        raise _bad(f, v, "too large for a floating-point number")
    if not math.isfinite(v):
        raise _bad(f, v, "not a finite number (tomstats writes a value it could not compute "
                         "as null)" if nullable else "not a finite number")


def _array_of(shape: Callable[[dict[str, Any]], tuple[int, ...] | None],
              nonneg: bool = False) -> _Check:
    """A check of a (nested) list of numbers of ``shape(d)`` (``None``: any 1-D length)."""
    def check(v: Any, f: str, d: dict[str, Any]) -> None:
        nullable = f in NULLABLE
        want = shape(d)
        dims = (None,) if want is None else want
        _nested(v, f, dims, nullable)
        if nonneg:
            for i, x in enumerate(v):
                if x is not None and x < 0:
                    raise _bad(f"{f}[{i}]", x, "a standard deviation cannot be negative")
    return check


def _nested(v: Any, f: str, dims: tuple[int | None, ...], nullable: bool) -> None:
    if not dims:
        _number(v, f, nullable)
        return
    n = dims[0]
    if not isinstance(v, list):
        raise _bad(f, v, f"expected a list of {n if n is not None else 'any number of'} "
                         f"value(s)")
    if n is not None and len(v) != n:
        raise _bad(f, f"<{len(v)} values>", f"expected {n}, as the fit declares")
    for i, x in enumerate(v):
        _nested(x, f"{f}[{i}]", dims[1:], nullable)


def _scalar(v: Any, f: str, _: dict[str, Any]) -> None:
    _number(v, f, f in NULLABLE)


def _const(*allowed: Any) -> _Check:
    def check(v: Any, f: str, _: dict[str, Any]) -> None:
        if isinstance(v, bool) or v not in allowed:
            raise _bad(f, v, f"expected {' or '.join(map(repr, allowed))}")
    return check


def _versions(v: Any, f: str, _: dict[str, Any]) -> None:
    if not isinstance(v, dict):
        raise _bad(f, v, "expected an object of package versions")
    for k, x in v.items():
        if not isinstance(x, (str, type(None))):
            raise _bad(f"{f}.{k}", x, "expected a version string")


def _formula(v: Any, f: str, _: dict[str, Any]) -> None:
    from tomstats._expr import check_formula

    _string(v, f, _)
    check_formula(v, "the fit file's stored formula")


def _groups(v: Any, f: str, d: dict[str, Any]) -> None:
    from tomstats._expr import check_group

    _strings(v, f, d)
    for g in v:
        check_group(g, "the fit file's stored grouping factor")


def _levels(v: Any, f: str, d: dict[str, Any]) -> None:
    if not isinstance(v, list) or len(v) != len(d["groups"]):
        raise _bad(f, v, f"expected one list of levels per group ({len(d['groups'])})")
    for k, (lv, n) in enumerate(zip(v, d["n_levels"], strict=True)):
        _strings(lv, f"{f}[{k}]", d)
        if len(lv) != n:
            raise _bad(f"{f}[{k}]", f"<{len(lv)} levels>", f"n_levels[{k}] declares {n}")


def _n_levels(v: Any, f: str, d: dict[str, Any]) -> None:
    if not isinstance(v, list) or len(v) != len(d["groups"]):
        raise _bad(f, v, f"expected one count per group ({len(d['groups'])})")
    for i, n in enumerate(v):
        _count(n, f"{f}[{i}]", d)


_TERM_FIELDS: dict[str, _Check] = {"group": _string, "effects": _strings,
                                   "correlated": _boolean, "levels": _strings, "expr": _string}


def _terms(v: Any, f: str, d: dict[str, Any]) -> None:
    from tomstats._expr import check_group, check_terms

    if not isinstance(v, list):
        raise _bad(f, v, "expected a list of random-effects terms")
    for i, t in enumerate(v):
        if not isinstance(t, dict):
            raise _bad(f"{f}[{i}]", t, "expected an object")
        _check_fields(t, _TERM_FIELDS, f"{f}[{i}].", optional=("expr",))
        check_group(t["group"], "the fit file's stored term group")
        if t.get("expr"):
            check_terms(t["expr"], "the fit file's stored term")


def _term_sizes(d: dict[str, Any]) -> tuple[int, int, int]:
    """(θ elements, conditional modes, their variances) of an lme fit's ``terms``."""
    m = nb = nv = 0
    for t in d["terms"]:
        q, k = len(t["levels"]), len(t["effects"])
        m += n_theta(k, t["correlated"])
        nb += q * k
        nv += q * k * k
    return m, nb, nv


def _p(d: dict[str, Any]) -> int:
    return len(d["coef_names"])


_COMMON: dict[str, _Check] = {
    "format": _const(*ML_FORMATS), "format_version": _const(JSON_FORMAT_VERSION),
    "backend": _const("laplace"), "formula": _formula, "family": _const(*FAMILIES),
    "n_obs": _count, "n_rows": _count, "coef_names": _strings,
    "beta": _array_of(lambda d: (_p(d),)), "se": _array_of(lambda d: (_p(d),)),
    "cov": _array_of(lambda d: (_p(d), _p(d))), "loglik": _scalar, "aic": _scalar,
    "bic": _scalar, "converged": _boolean, "iterations": _count, "se_method": _string,
    "aggregated": _boolean, "data_hash": _string, "created_at": _string,
    "versions": _versions,
}

#: The schema of the JSON fits: field → check, by format (in the order checked: a shape
#: declared by one field, such as ``coef_names`` or ``groups``, is checked before the arrays
#: it sizes).
JSON_FIELDS: dict[str, dict[str, _Check]] = {
    "tomstats-laplace-fit": {
        **_COMMON, "groups": _groups, "n_levels": _n_levels, "levels": _levels,
        "sd": _array_of(lambda d: (len(d["groups"]),), nonneg=True),
        "ranef": _array_of(lambda d: (sum(d["n_levels"]),)), "separation": _strings,
    },
    "tomstats-lme-fit": {
        **_COMMON, "terms": _terms, "theta": _array_of(lambda d: (_term_sizes(d)[0],)),
        "b": _array_of(lambda d: (_term_sizes(d)[1],)),
        "b_var": _array_of(lambda d: (_term_sizes(d)[2],)), "singular": _boolean,
        "grad_norm": _scalar, "hess_min_eig": _scalar, "pearson": _array_of(lambda d: None),
        "separation": _strings,
    },
}
#: Fields a JSON fit may leave out (written by every tomstats, but not needed to read it).
_OPTIONAL = ("backend", "se_method", "aggregated", "data_hash", "created_at", "versions",
             "separation", "grad_norm", "hess_min_eig", "pearson")


def _check_fields(d: dict[str, Any], schema: Mapping[str, _Check], prefix: str = "",
                  optional: Sequence[str] = _OPTIONAL) -> None:
    for k in d:
        if k not in schema:
            raise ValueError(f"unknown field {prefix + k!r}{closest_hint(k, schema)}")
    for k, check in schema.items():
        if k not in d:
            if k in optional:
                continue
            raise ValueError(f"field {prefix + k!r} is missing")
        check(d[k], prefix + k, d)


def check_ml_dict(d: Any) -> str:
    """Check a maximum-likelihood fit's parsed JSON against :data:`JSON_FIELDS`; return its
    format. Raises ``ValueError`` naming the first field that is wrong and its value."""
    if not isinstance(d, dict):
        raise ValueError(f"expected a JSON object, got a JSON {type(d).__name__}")
    fmt = d.get("format")
    if fmt not in ML_FORMATS:
        raise _bad("format", fmt, f"not a maximum-likelihood fit of 'tomstats fit --backend "
                                  f"laplace' (expected {' or '.join(map(repr, ML_FORMATS))})")
    version = d.get("format_version")
    if isinstance(version, bool) or version != JSON_FORMAT_VERSION:
        raise _bad("format_version", version, f"this tomstats reads version "
                                              f"{JSON_FORMAT_VERSION}")
    _check_fields(d, JSON_FIELDS[fmt])
    return str(fmt)


# --------------------------------------------------------------------------- files


def _where(path: Path, field: str) -> str:
    return f"{field} {str(path)!r}" if field else repr(str(path))


def _existing(path: str | os.PathLike[str], field: str) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{field or 'path'} must be a path, got {type(path).__name__}")
    p = Path(path)
    if p.is_dir():
        raise FitFileError(f"{_where(p, field)} is a folder, expected a fit file")
    if not p.is_file():
        raise FileNotFoundError(f"fit file {str(p)!r} does not exist")
    return p


def _head(p: Path, n: int = 8) -> bytes:
    with p.open("rb") as fh:
        return fh.read(n)


def is_netcdf(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is read as a netCDF fit: a ``.nc``, ``.netcdf`` or ``.h5`` file, or
    one that starts with the netCDF-3 (``CDF``) or netCDF-4/HDF5 signature."""
    p = Path(path)
    try:
        return p.is_file() and (p.suffix.lower() in (".nc", ".netcdf", ".h5") or _head(
            p).startswith((b"CDF\x01", b"CDF\x02", b"\x89HDF")))
    except OSError:
        return False


def is_ml_fit(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` looks like a maximum-likelihood fit's JSON (a ``.json`` file whose
    start names one of :data:`ML_FORMATS`, or any file starting with ``{`` that is not
    netCDF); :func:`load_ml_dict` then checks it whole."""
    p = Path(path)
    try:
        if not p.is_file() or is_netcdf(p):
            return False
        head = _head(p, 4096).decode("utf-8", errors="replace")
    except OSError:
        return False
    return p.suffix.lower() == ".json" or head.lstrip().startswith("{") or any(
        f'"{f}"' in head for f in ML_FORMATS)


def read_fit_json(path: str | os.PathLike[str], field: str = "") -> Any:
    """The parsed JSON of a fit file: UTF-8, at most :data:`MAX_JSON_BYTES`, read as every
    text input is (:func:`tomstats._validate.read_text`: a regular file, no NUL byte), no key
    twice in one object, no ``NaN``/``Infinity`` tokens (not JSON)."""
    p = _existing(path, field)
    size = p.stat().st_size
    if size > MAX_JSON_BYTES:
        raise FitFileError(f"{_where(p, field)}: {size:,} bytes, larger than any fit's JSON "
                           f"({MAX_JSON_BYTES:,} bytes at most)")
    try:
        text = read_text(p, field or None)
        # NaN and Infinity are not JSON: read them as numbers, so that the schema refuses them
        # naming the field (``field 'beta[0]' is nan: not a finite number``)
        return json.loads(text, object_pairs_hook=unique_pairs, parse_constant=float)
    except DuplicateKeyError as exc:
        raise FitFileError(f"{_where(p, field)}: {exc}; refusing an ambiguous fit file") \
            from None
    except ValueError as exc:
        raise FitFileError(f"{_where(p, field)} is not JSON: {exc}") from None
    except RecursionError:
        raise FitFileError(f"{_where(p, field)} is not JSON: nested too deeply") from None


def load_ml_dict(path: str | os.PathLike[str], field: str = "") -> tuple[str, dict[str, Any]]:
    """A maximum-likelihood fit's JSON, read (:func:`read_fit_json`) and checked whole
    (:func:`check_ml_dict`): its format and the dictionary, ready for the ``from_dict`` of
    its class (:func:`tomstats.glmm.fit_reader.read_ml_fit` picks the class).

    Raises
    ------
    FileNotFoundError
        No such file.
    FitFileError
        Anything else wrong, one line naming the file, the field and the value.
    """
    p = _existing(path, field)
    if is_netcdf(p):
        raise FitFileError(f"{_where(p, field)} is a sampler fit (netCDF), not a "
                           f"maximum-likelihood fit's JSON")
    d = read_fit_json(p, field)
    try:
        return check_ml_dict(d), d
    except ValueError as exc:
        raise FitFileError(f"{_where(p, field)}: {exc}") from None


# --------------------------------------------------------------------------- netCDF

#: Attribute of a sampler fit's posterior (and root) that names its format version.
FORMAT_KEY = "tomstats_glmm_format"
#: The version of the sampler fits' layout this tomstats writes and reads.
FORMAT_VERSION = "1"


def fit_dims(spec: Any) -> dict[str, list[str]]:
    """The dimensions (after ``chain`` and ``draw``) of the posterior variables of a fit of
    ``spec``, by variable name: the layout :func:`tomstats.glmm.fit` writes and the reader
    checks."""
    from tomstats.glmm.spec import StructuralSpec

    if isinstance(spec, StructuralSpec):
        d = {k: ["llm"] for k in ("capability", "capability_z", "gamma_llm", "gamma_llm_z",
                                  "alpha_llm", "alpha_llm_z", "alpha_llm_dev")}
        d.update({"item_z": ["item"], "item_effect": ["item"]})
        return d
    d = {"beta": ["coef"], "beta_c": ["coef"]}
    for t in spec.random:
        eff = f"{t.key}_effect"
        d.update({f"sd_{t.key}": [eff], f"z_{t.key}": [t.dim, eff], f"re_{t.key}": [t.dim, eff],
                  f"L_{t.key}": [eff, eff + "2"], f"corr_{t.key}": [eff, eff + "2"]})
    return d



def netcdf_engine() -> str:
    """``netcdf4`` when the netCDF4 library is installed, else ``h5netcdf`` (needs h5py)
    (:func:`tomstats._netcdf.netcdf_engines`)."""
    from tomstats._netcdf import netcdf_engines

    usable = netcdf_engines()
    if not usable:
        raise ValueError("writing/reading netCDF needs the netCDF4 package (or h5py for "
                         "h5netcdf); install one of them")
    return usable[0]


def open_netcdf(p: Path, field: str = "fit file") -> Any:
    """The one place a fit's netCDF is opened: the size of every variable it declares is
    checked before any is read (:func:`tomstats._netcdf.open_inference_data`, which raises
    :class:`~tomstats._netcdf.NetcdfBudgetError`), then an ArviZ InferenceData, or
    ``ValueError`` naming the file when it is not readable netCDF."""
    from tomstats._netcdf import NetcdfBudgetError, open_inference_data

    try:
        return open_inference_data(p, field=field, eager=True)
    except NetcdfBudgetError:
        raise
    except Exception as exc:  # h5py/netCDF/xarray raise many types
        raise FitFileError(f"{str(p)!r} is not a readable netCDF InferenceData file: "
                           f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}") \
            from exc


def read_netcdf_fit(path: str | os.PathLike[str], field: str = "") -> Any:
    """A sampler fit (netCDF InferenceData of :func:`tomstats.glmm.save_fit`), checked whole
    (:func:`check_netcdf_fit`).

    Raises
    ------
    FileNotFoundError
        No such file.
    FitFileError
        Anything else wrong, one line naming the file, the field and the value.
    """
    p = _existing(path, field)
    if is_ml_fit(p):
        raise FitFileError(f"{_where(p, field)} is a maximum-likelihood fit's JSON, not a "
                           f"sampler fit (netCDF)")
    idata = open_netcdf(p, field or "fit file")
    try:
        check_netcdf_fit(idata)
    except ValueError as exc:
        raise FitFileError(f"{_where(p, field)}: {exc}") from None
    return idata


def _attr_count(attrs: Mapping[str, Any], name: str) -> int | None:
    if name not in attrs:
        return None
    v = attrs[name]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, int):
        raise _refused(f"attribute {name!r}", v, "expected a whole number")
    if v < 0:
        raise _refused(f"attribute {name!r}", v, "a count cannot be negative")
    return v


def _finite(da: Any, name: str) -> None:
    values = np.asarray(da.values)
    if values.dtype.kind not in "biuf":
        raise _refused(name, f"<{values.dtype} values>", "expected numbers")
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        bad = values[~np.isfinite(values)].ravel()[0]
        raise _refused(name, float(bad), "not finite: a fit's values are finite numbers")


def check_netcdf_fit(idata: Any) -> None:
    """Check a sampler fit's InferenceData (see the module docstring); ``ValueError``
    naming the group, variable or attribute that is wrong."""
    from tomstats.glmm.spec import spec_from_json

    groups = list(idata.groups())
    if "posterior" not in groups:
        raise ValueError(f"has no 'posterior' group (groups: {groups}): not a tomstats GLMM "
                         f"fit (write fits with 'tomstats fit')")
    post = idata.posterior
    attrs = dict(post.attrs)
    fmt = attrs.get(FORMAT_KEY)
    if fmt is None:
        raise ValueError(f"not a tomstats GLMM fit (no {FORMAT_KEY!r} attribute); refusing "
                         f"to read a foreign InferenceData")
    if str(fmt) != FORMAT_VERSION:
        raise _refused(f"attribute {FORMAT_KEY!r}", fmt, f"this tomstats reads fit format "
                                                    f"{FORMAT_VERSION!r}")
    for g in ("constant_data", "sample_stats"):
        if g not in groups:
            raise ValueError(f"lacks the {g!r} group; the file is damaged")
    if "spec" not in attrs:
        raise ValueError("attribute 'spec' is missing; the file is damaged")
    spec = spec_from_json(str(attrs["spec"]))
    for name in ("family",):
        if name in attrs and attrs[name] not in FAMILIES:
            raise _refused(f"attribute {name!r}", attrs[name], f"expected "
                                                         f"{' or '.join(map(repr, FAMILIES))}")
    if spec.family not in FAMILIES:
        raise _refused("the spec's family", spec.family,
                   f"expected {' or '.join(map(repr, FAMILIES))}")
    n_obs = _attr_count(attrs, "n_obs")
    n_rows = _attr_count(attrs, "n_rows")
    for name in ("aggregated", "seed", "max_tree_depth"):
        _attr_count(attrs, name)
    if "chain" not in post.dims or "draw" not in post.dims or not post.data_vars:
        raise ValueError("the 'posterior' group has no (chain, draw) variables")
    if post.sizes["chain"] < 1 or post.sizes["draw"] < 1:
        raise ValueError(f"the posterior has {post.sizes['chain']} chain(s) × "
                         f"{post.sizes['draw']} draw(s)")
    declared = fit_dims(spec)
    if spec.kind == "formula" and "beta" not in post:
        raise ValueError("posterior variable 'beta' is missing (a formula fit's fixed "
                         "effects)")
    for name, da in post.data_vars.items():
        want = ("chain", "draw", *declared.get(str(name), ()))
        got = tuple(map(str, da.dims))
        if got[:2] != ("chain", "draw") or (str(name) in declared and got != want):
            raise _refused(f"posterior variable {name!r}", f"<dims {got}>",
                       f"expected dims {want}")
        for dim in got[2:]:
            if dim in declared.get(str(name), ()) and dim not in post.coords:
                raise ValueError(f"posterior variable {name!r}: dimension {dim!r} has no "
                                 f"coordinate (its names); the file is damaged")
        _finite(da, f"posterior variable {name!r}")
    _check_observations(idata, n_obs, n_rows)


def _check_observations(idata: Any, n_obs: int | None, n_rows: int | None) -> None:
    """Observed counts ``0 ≤ y ≤ trials`` on ``obs``; ``n_obs``/``n_rows`` as declared."""
    groups = list(idata.groups())
    cd = idata.constant_data
    if n_rows is not None and "row" in cd.dims and cd.sizes["row"] != n_rows:
        raise _refused("attribute 'n_rows'", n_rows, f"the constant_data holds {cd.sizes['row']} "
                                               f"rows")
    trials = cd["obs_trials"].values if "obs_trials" in cd else None
    if trials is not None:
        _finite(cd["obs_trials"], "constant_data variable 'obs_trials'")
        if (np.asarray(trials) < 0).any():
            raise _refused("constant_data variable 'obs_trials'", int(np.min(trials)),
                       "a count cannot be negative")
    if "row_obs" in cd:
        ro = np.asarray(cd["row_obs"].values)
        if ro.dtype.kind not in "iu" or (ro.size and (ro.min() < 0 or (
                n_obs is not None and ro.max() >= n_obs))):
            raise _refused("constant_data variable 'row_obs'", f"<{ro.dtype} in "
                       f"[{ro.min() if ro.size else ''}, {ro.max() if ro.size else ''}]>",
                       f"expected observation indices in [0, {n_obs})")
    if "observed_data" not in groups or "y" not in idata.observed_data:
        return
    y = idata.observed_data["y"]
    if tuple(map(str, y.dims)) != ("obs",):
        raise _refused("observed_data variable 'y'", f"<dims {tuple(map(str, y.dims))}>",
                   "expected dims ('obs',)")
    _finite(y, "observed_data variable 'y'")
    yv = np.asarray(y.values)
    if n_obs is not None and yv.size != n_obs:
        raise _refused("attribute 'n_obs'", n_obs, f"the observed_data holds {yv.size} "
                                             f"observations")
    if (yv < 0).any():
        raise _refused("observed_data variable 'y'", float(yv.min()), "a count cannot be negative")
    if trials is not None and np.shape(trials) == yv.shape and (yv > trials).any():
        i = int(np.argmax(yv > trials))
        raise _refused(f"observed_data variable 'y'[{i}]", float(yv[i]),
                   f"more successes than trials ({int(trials[i])})")
    if "log_likelihood" in groups and "y" in idata.log_likelihood:
        ll = idata.log_likelihood["y"]
        if tuple(map(str, ll.dims))[2:] != ("obs",) or ll.sizes.get("obs") != yv.size:
            raise _refused("log_likelihood variable 'y'", f"<dims {dict(ll.sizes)}>",
                       f"expected (chain, draw, obs) with {yv.size} observations")
