"""R's printing of numbers and names, as lme4's ``summary()`` uses it: ``format(x, digits)``
(one layout for a whole vector: the decimals that show each value to ``digits`` significant
digits, fixed or scientific notation, whichever is narrower), ``format.pval``,
``printCoefmat``'s table of estimates, and ``abbreviate``. NumPy only; the rules are R's
(``src/main/format.c``, ``stats::printCoefmat``, ``base::format.pval``, ``abbreviate``'s
C code), so that a printed fit reads like lme4's."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["r_format", "r_format_pval", "r_coef_table", "r_abbreviate", "r_named"]


def _sig(x: float, digits: int) -> tuple[bool, int, int]:
    """(negative, decimal exponent, significant digits needed) of ``x`` shown to ``digits``
    significant digits, trailing zeros dropped (R's ``scientific()``)."""
    if x == 0.0:
        return False, 0, 1
    a = abs(x)
    kp = math.floor(math.log10(a))
    m = round(a / 10.0 ** kp * 10 ** (digits - 1))
    if m >= 10 ** digits:  # rounding carried into a new digit: 9.9996 -> 10.00
        kp += 1
        m = round(a / 10.0 ** kp * 10 ** (digits - 1))
    nsig = digits
    while nsig > 1 and m % 10 == 0:
        m //= 10
        nsig -= 1
    return x < 0, kp, nsig


def r_format(values: Sequence[float] | np.ndarray, digits: int = 7, nsmall: int = 0
             ) -> list[str]:
    """R's ``format(values, digits = digits, nsmall = nsmall)``: every value with the same
    number of decimals (the most any value needs for ``digits`` significant digits) or all
    in scientific notation where that is narrower; right-aligned to one width."""
    xs = [float(v) for v in np.asarray(values, dtype=float).ravel()]
    fin = [x for x in xs if math.isfinite(x)]
    if not fin:
        out = ["NA" if math.isnan(x) else ("-Inf" if x < 0 else "Inf") for x in xs]
    else:
        info = [_sig(x, digits) for x in fin]
        neg = any(n for n, _, _ in info)
        sleft = max(int(n) + (1 if kp + 1 <= 0 else kp + 1) for n, kp, _ in info)
        rgt = max(max(0, ns - kp - 1) for _, kp, ns in info)
        w_fixed = sleft + rgt + (rgt > 0)
        mxe, mne = max(kp for _, kp, _ in info), min(kp for _, kp, _ in info)
        d = max(ns for _, _, ns in info) - 1
        e = 2 if (mxe >= 100 or mne <= -99) else 1
        w_sci = int(neg) + (d > 0) + d + 4 + e
        if w_fixed <= w_sci:
            rgt = max(rgt, nsmall)
            out = [f"{x:.{rgt}f}" if math.isfinite(x) else _nonfinite(x) for x in xs]
        else:
            out = [f"{x:.{d}e}" if math.isfinite(x) else _nonfinite(x) for x in xs]
    width = max(len(s) for s in out)
    return [s.rjust(width) for s in out]


def _nonfinite(x: float) -> str:
    return "NaN" if math.isnan(x) else ("-Inf" if x < 0 else "Inf")


def r_format_pval(p: Sequence[float], digits: int) -> list[str]:
    """R's ``format.pval(p, digits, eps = .Machine$double.eps)``: values below the machine
    epsilon as ``< 2e-16`` (or ``<2e-16``), the others formatted together, those below
    1e-4 (below 1e-3 with one digit) apart from the rest."""
    eps = float(np.finfo(float).eps)
    ps = [float(v) for v in p]
    out = [""] * len(ps)
    small = [v < eps for v in ps]
    rest = [i for i, s in enumerate(small) if not s]
    if rest:
        expo = {i: math.floor(math.log10(ps[i] if ps[i] > 0 else 1e-50)) for i in rest}
        fixp = [i for i in rest if expo[i] >= -3 or (expo[i] == -4 and digits > 1)]
        sci = [i for i in rest if i not in fixp]
        for group in (fixp, sci):
            if group:
                for i, s in zip(group, r_format([ps[j] for j in group], digits), strict=True):
                    out[i] = s.strip()
    if any(small):
        dg = max(1, digits - 2)
        if rest:
            nc = max(len(out[i]) for i in rest)
            if dg > 1 and dg + 6 > nc:
                dg = max(1, nc - 7)
            sep = "" if dg == 1 and nc <= 6 else " "
        else:
            sep = "" if dg == 1 else " "
        text = "<" + sep + r_format([eps], dg)[0].strip()
        out = [text if s else o for s, o in zip(small, out, strict=True)]
    return out


def r_named(names: Sequence[str], values: Sequence[str]) -> list[str]:
    """R's ``print`` of a named vector (one line): every entry right-aligned to one width,
    each followed by a space; two lines, names above values."""
    w = max(len(s) for s in [*names, *values])
    return ["".join(f"{s:>{w}} " for s in names), "".join(f"{s:>{w}} " for s in values)]


def _stars(p: float) -> str:
    if not math.isfinite(p):
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else \
        "." if p < 0.1 else " "


def r_coef_table(names: Sequence[str], estimate: np.ndarray, se: np.ndarray, z: np.ndarray,
                 p: np.ndarray, digits: int = 4) -> list[str]:
    """``printCoefmat`` of ``Estimate``, ``Std. Error``, ``z value``, ``Pr(>|z|)`` as lme4's
    ``summary`` calls it (``digits = 4``): estimates and SEs rounded together to
    :math:`\\max(1, d - 1 - \\lfloor\\log_{10}\\min|x|\\rfloor)` decimals and formatted as
    one, z rounded to 3 decimals, p by :func:`r_format_pval` with 3 digits, significance
    stars (and their legend) when some p is below 0.1."""
    dig_tst = max(1, min(5, digits - 1))
    cs = np.concatenate([np.asarray(estimate, float), np.asarray(se, float)])
    acs = np.abs(cs[np.isfinite(cs) & (cs != 0)])
    digmin = 1 + (math.floor(math.log10(float(acs.min()))) if acs.size else 0)
    k = len(names)
    cs_text = r_format(np.round(cs, max(1, digits - digmin)), digits)
    z_text = r_format(np.round(np.asarray(z, float), dig_tst), digits)
    p = np.asarray(p, float)
    ok = np.isfinite(p)
    p_text = ["NA"] * k
    for i, s in zip(np.flatnonzero(ok), r_format_pval(p[ok], dig_tst), strict=True):
        p_text[i] = s
    columns = {"Estimate": [s for s in cs_text[:k]], "Std. Error": cs_text[k:],
               "z value": z_text, "Pr(>|z|)": p_text}
    stars = bool(np.any(p[ok] < 0.1))
    if stars:
        marks = [_stars(v) for v in p]
        sw = max(len(m) for m in marks)
        columns[""] = [m.ljust(sw) for m in marks]
    wn = max(len(n) for n in names)
    widths = {c: max(len(c), *(len(v) for v in vals)) for c, vals in columns.items()}
    lines = [" " * wn + "".join(f" {c:>{widths[c]}}" for c in columns)]
    for i, name in enumerate(names):
        lines.append(f"{name:<{wn}}" + "".join(f" {columns[c][i]:>{widths[c]}}"
                                               for c in columns))
    if stars:
        lines += ["---", "Signif. codes:  0 '***' 0.001 '**' 0.01 '*' 0.05 '.' 0.1 ' ' 1"]
    return lines


def _abbreviate_one(name: str, minlength: int) -> str:
    """``abbreviate(name, minlength)`` (``method = "left.kept"``) of one name: drop
    lower-case vowels that end a word, then other lower-case vowels that do not start one,
    then lower-case letters likewise, each from the right, until ``minlength`` characters
    are left; then any character that does not start a word."""
    s = list(name.strip())
    if len(s) <= minlength:
        return "".join(s)

    def first(i: int) -> bool:
        return s[i - 1].isspace()

    def last(i: int) -> bool:
        return not s[i - 1].isspace() and (i + 1 == len(s) or s[i + 1].isspace())

    rules = (lambda i: s[i] in "aeiou" and last(i), lambda i: s[i] in "aeiou" and not first(i),
             lambda i: s[i].islower() and last(i), lambda i: s[i].islower() and not first(i),
             lambda i: not first(i) and not s[i].isspace())
    for rule in rules:
        for i in range(len(s) - 1, 0, -1):
            if i < len(s) and rule(i):
                del s[i]
            if len(s) - sum(c.isspace() for c in s) <= minlength:
                return "".join(c for c in s if not c.isspace()) if len(s) > minlength \
                    else "".join(s)
    return "".join(s)


def r_abbreviate(names: Sequence[str], minlength: int) -> list[str]:
    """R's ``abbreviate(names, minlength)``: names that come out alike are abbreviated again
    with one more character, until all differ."""
    out = [_abbreviate_one(n, minlength) for n in names]
    length = minlength
    while len(set(out)) < len(out) and length < max(len(n) for n in names):
        length += 1
        dup = {a for a in out if out.count(a) > 1}
        out = [_abbreviate_one(n, length) if a in dup else a for n, a in zip(names, out,
                                                                             strict=True)]
    return out
