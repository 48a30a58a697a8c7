"""One maximum-likelihood GLMM fit in a new process: ``tomstats fit --backend laplace`` (both
engines) against ``Rscript`` running lme4's ``glmer`` on the same log, in the same run.

Two designs (``--design``), each a crossed log with one row per LLM and passage; each
passage has a belief (true/false) and a cue (absent/present); the outcome is simulated
(seeded) with LLM SD 0.8 and passage SD 0.6:

- ``intercepts`` (issue 25): 41 LLMs × 192 passages (7,872 rows),
  ``correct ~ belief * cue + (1 | model) + (1 | item)``; similar log 43 × 190;
- ``slopes``: 40 LLMs × 200 passages (8,000 rows), each LLM with its own belief effect
  (SD 0.5, correlation 0.3 with its intercept),
  ``correct ~ belief * cue + (1 + belief | model) + (1 | item)``; similar log 38 × 196
  (the same buckets of sizes: 40 and 38 LLMs both pad to 40, while 42 would pad to 48
  and compile anew).

``../shared/data`` holds no log of these shapes, so they are simulated; ``--log FILE
--formula F`` times any CSV instead.

Each round runs, each in a fresh process, in this order:

- ``R``: ``Rscript -e`` reading the CSV and fitting ``glmer(formula, family = binomial)``
  (lme4's defaults), printing the fixed effects;
- ``interpreted``: ``tomstats fit`` as a user runs it (``engine=auto``, which picks the
  interpreted NumPy fit for these logs), with an empty compilation cache folder. The
  interpreted fit imports no JAX and keeps nothing between processes, so this one row is
  both its cold start (a fresh process, no cache of tomstats') and its warm one; only the
  operating system's file cache and Python's bytecode of the installed packages, there for
  every command alike, carry over;
- ``jax, cold``: ``tomstats fit --option engine=jax`` with an empty compilation cache
  (``TOMSTATS_JAX_CACHE`` set to a new folder): XLA compiles the fit;
- ``jax, warm``: the same command with the cache the cold run filled;
- ``jax, warm, similar log``: another simulated log of a slightly different size with that
  cache: its shapes pad to the same buckets, so the compiled fit is reused.

Times are medians over ``--repeats`` rounds: wall seconds, and CPU seconds (user + system of
the command's process and its threads: steadier on a shared machine). Ratios are R's median
over tomstats'. Before the rounds the script checks that each engine's fit agrees with
glmer's (fixed effects and standard errors within 2e-3, the SDs within 1 %) and reports the
largest differences between the two engines.

    python benchmarks/bench_fit_startup.py [--repeats 5] [--design intercepts|slopes]
        [--log FILE --formula F] [--write-docs]

``--write-docs`` puts the table into docs/glmm.md between this script's markers (those of
``[slopes]`` for the slopes design), with the command, the machine and its load
(:mod:`benchmarks._docs`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _docs import add_write_docs_argument, markdown_table, require_markers, write_docs

FORMULA = "correct ~ belief * cue + (1 | model) + (1 | item)"
#: Design -> (formula, (LLMs, passages), similar log's (LLMs, passages), belief slope SD).
DESIGNS = {
    "intercepts": (FORMULA, (41, 192), (43, 190), 0.0),
    "slopes": ("correct ~ belief * cue + (1 + belief | model) + (1 | item)", (40, 200),
               (38, 196), 0.5),
}

#: Runs a command in a child process; prints "<wall seconds> <CPU seconds> <exit code>".
_WRAP = ("import resource, subprocess, sys, time\n"
         "t = time.perf_counter()\n"
         "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
         "dt = time.perf_counter() - t\n"
         "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
         "print(dt, u.ru_utime + u.ru_stime, rc)")
_CLI = "import sys; from tomstats.cli import main; sys.exit(main(sys.argv[1:]))"
_R = ("suppressMessages(library(lme4)); args <- commandArgs(TRUE); d <- read.csv(args[1]); "
      "m <- glmer(as.formula(args[2]), data = d, family = binomial); "
      "s <- summary(m)$coefficients; "
      "vc <- as.data.frame(VarCorr(m)); vc <- vc[is.na(vc$var2), ]; "
      "cat(jsonlite::toJSON(list(beta = unname(s[, 1]), se = unname(s[, 2]), "
      "sd = list(group = vc$grp, effect = vc$var1, sd = vc$sdcor), "
      "loglik = as.numeric(logLik(m))), digits = NA))")


def simulate_log(path: Path, n_llms: int, n_items: int, seed: int,
                 slope_sd: float = 0.0) -> Path:
    """The crossed belief × cue log described in the module docstring, as CSV: the LLM's
    belief effect has SD ``slope_sd`` (correlation 0.3 with its intercept; none at 0)."""
    rng = np.random.default_rng(seed)
    belief = np.repeat(["false", "true"], n_items // 2 + 1)[:n_items]
    cue = np.tile(["absent", "present"], n_items // 2 + 1)[:n_items]
    llm = np.repeat(np.arange(n_llms), n_items)
    item = np.tile(np.arange(n_items), n_llms)
    fb = (belief[item] == "false").astype(float)
    cp = (cue[item] == "present").astype(float)
    a = rng.normal(0, 1, n_llms)
    llm_sd = 0.8 * a
    llm_slope = np.zeros(n_llms)
    if slope_sd > 0:  # (no draw otherwise: the intercepts log stays the one of issue 25)
        llm_slope = slope_sd * (0.3 * a + np.sqrt(1 - 0.3**2) * rng.normal(0, 1, n_llms))
    eta = (1.0 - 1.2 * fb + 0.3 * cp - 0.5 * fb * cp + llm_sd[llm] + llm_slope[llm] * fb
           + rng.normal(0, 0.6, n_items)[item])
    y = (rng.random(llm.size) < 1 / (1 + np.exp(-eta))).astype(int)
    pd.DataFrame({"model": [f"llm{k:02d}" for k in llm], "item": [f"p{j:03d}" for j in item],
                  "belief": belief[item], "cue": cue[item], "correct": y}
                 ).to_csv(path, index=False)
    return path


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    res = subprocess.run([sys.executable, "-c", _WRAP, *cmd], capture_output=True, text=True,
                         env=env, check=True)
    wall, cpu, rc = res.stdout.split()
    if int(rc) != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... exited {rc}")
    return float(wall), float(cpu)


def _tomstats(log: Path, formula: str, out: Path, engine: str = "auto") -> list[str]:
    return [sys.executable, "-c", _CLI, "fit", str(log), "--model", formula, "--backend",
            "laplace", "--out", str(out), "--force", "--option", f"engine={engine}"]


def _rscript(log: Path, formula: str) -> list[str]:
    return ["Rscript", "-e", _R, str(log), formula]


def check_agreement(log: Path, formula: str, work: Path) -> str:
    """The fits of ``log`` by both engines: each must equal glmer's (else the timing means
    nothing); the largest differences between the engines are reported too."""
    r = json.loads(subprocess.run(_rscript(log, formula), capture_output=True, text=True,
                                  check=True).stdout)
    from tomstats.glmm.lme_result import LaplaceFit

    fits = {}
    for engine in ("auto", "jax"):
        out = work / f"check-{engine}.json"
        subprocess.run(_tomstats(log, formula, out, engine), capture_output=True, check=True,
                       env=dict(os.environ, TOMSTATS_JAX_CACHE="off"))
        fits[engine] = LaplaceFit.from_json(out)
    said = [_agree_with_r(fits[e], r) for e in fits]
    a, b = fits["auto"], fits["jax"]
    between = (f"between the engines: max |d beta| "
               f"{float(np.max(np.abs(a.beta - b.beta))):.1e}, max |d se| "
               f"{float(np.max(np.abs(a.se - b.se))):.1e}, d logLik {a.loglik - b.loglik:.1e}")
    jax_said = said[1].removeprefix("agreement with glmer: ")
    return f"{said[0]} (interpreted; jax: {jax_said}); {between}"


def _agree_with_r(t: Any, r: dict) -> str:
    """One tomstats fit ``t`` against glmer's numbers ``r`` (SystemExit where they differ)."""
    d_beta = float(np.max(np.abs(np.subtract(t.beta, r["beta"]))))
    d_se = float(np.max(np.abs(np.subtract(t.se, r["se"]))))
    # lme4 orders the random terms by their number of levels: match them by group, the
    # effects of a group in the formula's order (their names differ: R reads "true" as
    # TRUE and names a level's column "beliefTRUE" where formulaic writes "belief")
    r_sd: dict[str, list[float]] = {}
    for g, s in zip(r["sd"]["group"], r["sd"]["sd"], strict=True):
        r_sd.setdefault(g, []).append(s)
    vc = t.VarCorr()
    vc = vc[vc["var2"] == ""]
    t_sd: dict[str, list[float]] = {}
    for g, s in zip(vc["group"], vc["sdcor"], strict=True):
        t_sd.setdefault(g, []).append(s)
    if sorted(t_sd) != sorted(r_sd):
        raise SystemExit(f"the fits have other groups: {sorted(t_sd)} and {sorted(r_sd)}")
    ratio = [x / y for g in t_sd for x, y in zip(t_sd[g], r_sd[g], strict=True)]
    d_sd = float(np.max(np.abs(np.subtract(ratio, 1))))
    if d_beta > 2e-3 or d_se > 2e-3 or d_sd > 1e-2:
        raise SystemExit(f"the fits differ: |d beta| {d_beta:.2g}, |d se| {d_se:.2g}, "
                         f"SD ratio - 1 {d_sd:.2g}")
    return (f"agreement with glmer: max |d beta| {d_beta:.1e}, max |d se| {d_se:.1e}, "
            f"max |SD ratio - 1| {d_sd:.1e}, d logLik {t.loglik - r['loglik'][0]:.1e}")


#: Columns of the table (printed, and written by ``--write-docs``).
COLUMNS = ("command (a new process each)", "wall s", "CPU s", "R / this (wall)",
           "R / this (CPU)")
R_ROW = "R: Rscript + glmer"
#: The page whose block ``--write-docs`` replaces.
PAGE = Path(__file__).resolve().parents[1] / "docs" / "glmm.md"


def row_keys(args: argparse.Namespace, part: str = "") -> list[str]:
    """The table's rows for these arguments (the similar log only with the simulated one);
    ``part`` is the docs block's (``""``: the intercepts design, ``"slopes"``)."""
    if part not in ("", "slopes") or (part or "intercepts") != args.design:
        raise ValueError(f"part {part!r} is not the table of --design {args.design}")
    rows = [R_ROW, "tomstats fit, interpreted (default; nothing cached: cold = warm)",
            "tomstats fit, engine=jax, cold cache", "tomstats fit, engine=jax, warm cache"]
    if args.log is None:
        n_llms, n_items = DESIGNS[args.design][2]
        rows.append(f"tomstats fit, engine=jax, warm cache, similar log ({n_llms} x {n_items})")
    return rows


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="rounds (medians are reported)")
    ap.add_argument("--log", type=Path, help="a CSV to time instead of the simulated log")
    ap.add_argument("--design", choices=sorted(DESIGNS), default="intercepts",
                    help="the simulated log and its formula (module docstring)")
    ap.add_argument("--formula", help="the formula of --log (default: the design's)")
    add_write_docs_argument(ap)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    if shutil.which("Rscript") is None:
        raise SystemExit("Rscript is not on the PATH (R with lme4 and jsonlite is needed)")
    part = "" if args.design == "intercepts" else args.design
    if args.write_docs:
        require_markers("bench_fit_startup.py", PAGE, part)
    formula, (n_llms, n_items), (s_llms, s_items), slope_sd = DESIGNS[args.design]
    formula = args.formula or formula
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        log = args.log or simulate_log(work / "log.csv", n_llms, n_items, 25, slope_sd)
        similar = None if args.log else simulate_log(work / "similar.csv", s_llms, s_items,
                                                     26, slope_sd)
        rows = len(pd.read_csv(log))
        what = log if args.log else f"simulated {n_llms} LLMs x {n_items} passages"
        print(f"log: {rows:,} rows ({what}); formula: {formula}")
        agreement = check_agreement(log, formula, work)
        print(agreement)
        print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.1f} at the start")
        times: dict[str, list[tuple[float, float]]] = {}
        for k in range(args.repeats):
            cache = work / f"cache{k}"
            env = dict(os.environ, TOMSTATS_JAX_CACHE=str(cache))
            cmds = [_rscript(log, formula), _tomstats(log, formula, work / "f.json"),
                    _tomstats(log, formula, work / "f.json", "jax"),
                    _tomstats(log, formula, work / "f.json", "jax")]
            if similar is not None:
                cmds.append(_tomstats(similar, formula, work / "g.json", "jax"))
            for name, cmd in zip(row_keys(args, part), cmds, strict=True):
                times.setdefault(name, []).append(_timed(cmd, env))
            shutil.rmtree(cache, ignore_errors=True)
    r_wall = statistics.median(w for w, _ in times[R_ROW])
    r_cpu = statistics.median(c for _, c in times[R_ROW])
    rows = []
    for name, ts in times.items():
        wall = statistics.median(w for w, _ in ts)
        cpu = statistics.median(c for _, c in ts)
        rows.append([name, f"{wall:.2f}", f"{cpu:.2f}", f"{r_wall / wall:.2f}",
                     f"{r_cpu / cpu:.2f}"])
    table = markdown_table(COLUMNS, rows)
    note = (f"\nMedians of {args.repeats} rounds, load average {os.getloadavg()[0]:.1f} at "
            f"the end. {agreement[0].upper() + agreement[1:]}.\n")
    print(table + note)
    if args.write_docs:
        write_docs("bench_fit_startup.py", argv, table + note, PAGE, part)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
