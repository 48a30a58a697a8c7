"""The size guard of ``tomstats fit``: chains × draws × rows, refused up front; --allow-large."""

from __future__ import annotations

import argparse

import pytest

import tomstats._guards as guards
from tomstats.glmm.cli import _check_sampler_sizes, fit_footprint


def _args(**kw) -> argparse.Namespace:
    base = dict(chains=4, draws=1000, tune=1000, cores=None, allow_large=False)
    return argparse.Namespace(**{**base, **kw})


def test_footprint_formula() -> None:
    fp = fit_footprint(4, 1000, 500, n_rows=10_000, cores=2)
    assert fp.bytes == 8.0 * 4 * 1000 * (10_000 + 64)
    assert fp.seconds == pytest.approx(4 * 1500 * 2e-7 * 10_000 / 2)
    assert fit_footprint(1, 10, 0).seconds == pytest.approx(10 * 1e-3)  # the floor


@pytest.mark.parametrize("kw,needle", [
    ({"draws": 10**10}, "fit too large"),
    ({"chains": 10**8}, "fit too large"),
    ({"draws": 3}, "--draws must be at least 4"),
    ({"chains": 0}, "--chains must be at least 1"),
    ({"tune": -1}, "--tune must be at least 0"),
])
def test_refused(kw, needle) -> None:
    with pytest.raises(ValueError, match=needle):
        _check_sampler_sizes(_args(**kw))


def test_rows_count_and_allow_large_overrides(monkeypatch) -> None:
    _check_sampler_sizes(_args(), n_rows=1000)  # the default run passes
    monkeypatch.setattr(guards, "available_memory", lambda: 10**8)  # a 100 MB machine
    with pytest.raises(ValueError, match=r"fit too large.*1,000,000 rows.*--allow-large"):
        _check_sampler_sizes(_args(), n_rows=1_000_000)  # the log-likelihood: 32 GB
    _check_sampler_sizes(_args(allow_large=True), n_rows=1_000_000)
