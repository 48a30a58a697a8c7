"""The size and content checks of the one reader of text inputs and of the netCDF opener
(security, third round: findings 4 and 5), in the process; ``tests/test_dos.py`` runs the
same inputs through the command line under a memory watchdog."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

import tomstats._guards as guards
from tomstats._validate import READ_CHUNK, read_input_bytes, read_text


def _sparse(path, head: bytes, size: int = 2 * 2**30):
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(size)
    return path


def test_a_nul_byte_is_refused_in_the_first_piece(tmp_path):
    p = _sparse(tmp_path / "t.csv", b"a,b\n1,2\n")
    with pytest.raises(ValueError, match=r"t.csv: a NUL byte at byte 9; this is not a text "):
        read_input_bytes(p)


def test_a_nul_byte_far_in_is_found_too(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(b"x" * (3 * READ_CHUNK + 5) + b"\0" + b"y" * 10)
    with pytest.raises(ValueError, match=f"a NUL byte at byte {3 * READ_CHUNK + 6};"):
        read_text(p, "--weave")
    p.write_bytes(b"x" * (3 * READ_CHUNK + 5))
    assert read_text(p) == "x" * (3 * READ_CHUNK + 5)


def test_a_file_over_the_memory_budget_is_refused_before_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(guards, "available_memory", lambda: 100 * 2**20)  # 100 MiB free
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "big.csv"
    with open(p, "wb") as fh:  # 30 MiB of text, sparse: 4 × 30 MiB > 80 % of 100 MiB
        fh.truncate(30 * 2**20)
    with pytest.raises(ValueError, match=r"--items: 'big.csv' too large: needs about 120.0 MiB"
                                         r" of memory \(30.0 MiB read whole"):
        read_input_bytes("big.csv", "--items")


def test_a_gzip_bomb_stops_at_the_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(guards, "available_memory", lambda: 100 * 2**20)
    p = tmp_path / "bomb.csv.gz"
    with gzip.open(p, "wb") as fh:  # 64 MiB of text in about 64 KiB
        row = b"1,a,i1,0,200\n" * 8192
        for _ in range(64 * 2**20 // len(row)):
            fh.write(row)
    assert p.stat().st_size < 2**20
    with pytest.raises(ValueError, match="too large"):
        read_input_bytes(p, gzip=True)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    p = tmp_path / "pipe.csv"
    os.mkfifo(p)
    with pytest.raises(ValueError, match="is not a regular file"):
        read_input_bytes(p)


def test_a_broken_gzip_file_is_named(tmp_path):
    p = tmp_path / "t.csv.gz"
    p.write_bytes(gzip.compress(b"a,b\n1,2\n")[:-12] + b"garbage!")
    with pytest.raises(ValueError, match="not a readable gzip file"):
        read_input_bytes(p, gzip=True)


# --------------------------------------------------------------------------- netCDF


def _idata_nc(path):
    """A small InferenceData with a posterior, written as netCDF by ArviZ."""
    import arviz as az

    rng = np.random.default_rng(0)
    idata = az.from_dict(posterior={"beta": rng.normal(size=(2, 50, 3))},
                         constant_data={"x": np.arange(10.0)})
    idata.to_netcdf(str(path))
    return path


def _forge(path, elements: int = 10**9, group: str = "posterior"):
    import netCDF4

    with netCDF4.Dataset(path, "a") as ds:
        g = ds.groups[group]
        g.createDimension("forged_dim", elements)
        g.createVariable("forged", "f8", ("forged_dim",), zlib=True, chunksizes=(2**20,))
    return path


def test_a_forged_variable_is_refused_from_the_metadata(tmp_path):
    from tomstats._netcdf import NetcdfBudgetError, check_netcdf_budget, open_inference_data

    p = _idata_nc(tmp_path / "fit.nc")
    small = check_netcdf_budget(p)
    assert small == 8 * (2 * 50 * 3 + 2 + 50 + 3 + 10 + 10)  # values and coordinates
    _forge(p)
    assert p.stat().st_size < 2**20
    with pytest.raises(NetcdfBudgetError, match=r"fit: '.*fit.nc' declares 7.5 GiB of data "
                                                r"\(largest: /posterior/forged 1000000000\)"):
        open_inference_data(p)


def test_a_variable_under_the_floor_is_read(tmp_path):
    """A never-written variable the size of a real fit's largest (compressed) one is fine."""
    from tomstats._netcdf import open_inference_data

    p = _forge(_idata_nc(tmp_path / "fit.nc"), elements=4 * 1000 * 2000)  # 64 MB
    idata = open_inference_data(p)
    assert idata.posterior["forged"].shape == (4 * 1000 * 2000,)


def test_the_memory_budget_applies_to_what_the_file_can_hold(tmp_path, monkeypatch):
    from tomstats._netcdf import NetcdfBudgetError, check_netcdf_budget

    p = _idata_nc(tmp_path / "fit.nc")
    monkeypatch.setattr(guards, "available_memory", lambda: 1000)
    with pytest.raises(NetcdfBudgetError, match=r"fit '.*fit.nc' too large: needs about"):
        check_netcdf_budget(p)


def test_the_fit_loaders_use_the_opener(tmp_path):
    from tomstats._netcdf import NetcdfBudgetError
    from tomstats.glmm.fitting import load_fit
    from tomstats.report.fit import load_fit as report_load_fit

    p = _forge(_idata_nc(tmp_path / "fit.nc"), group="constant_data")
    for load in (load_fit, report_load_fit):
        with pytest.raises(NetcdfBudgetError, match="declares 7.5 GiB"):
            load(p)
