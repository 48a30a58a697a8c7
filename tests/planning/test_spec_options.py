"""PowerSpec's fields are declared once: the ``[power]`` table's keys, its JSON form and the
``tomstats power`` options all come from that declaration."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from tomstats.planning.cli import add_power_arguments
from tomstats.simulation.study import PowerSpec, spec_options


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tomstats power")
    add_power_arguments(p)
    return p


def test_every_field_is_declared_with_its_option() -> None:
    names = [f.name for f in dataclasses.fields(PowerSpec)]
    assert [n for n, _ in spec_options()] == names
    table = {n for n, o in spec_options() if o.table}
    assert table == set(PowerSpec().to_dict()) | {"by"}  # by appears only when set
    assert {"values", "by_values"}.isdisjoint(table)  # given inside along / by


def test_the_command_line_has_one_option_per_declared_field() -> None:
    p = _parser()
    dests = {a.dest: a for a in p._actions}
    for name, option in spec_options():
        if option.cli:
            assert name in dests, name
            assert dests[name].default is None  # unset: the TOML's value stands
        else:
            assert name not in dests, name
    assert "rm-anova:interaction" in dests["tests"].help  # the {tests} of the declaration


def test_options_reach_the_spec_and_the_table_round_trips() -> None:
    args = _parser().parse_args(["cfg.toml", "--out", "o", "--test", "anova:tom_order",
                                 "--test", "glm-lrt:delta", "--alpha", "0.01",
                                 "--replicates", "50", "--correction", "HF",
                                 "--n-llms", "4", "--by", "items_per_cell=2,4"])
    assert args.tests == ["anova:tom_order", "glm-lrt:delta"]
    assert (args.alpha, args.replicates, args.correction, args.n_llms) == (0.01, 50, "HF", 4)
    spec = PowerSpec(tests=tuple(args.tests), alpha=args.alpha, by="items_per_cell",
                     by_values=(2, 4), capability_sd=0.2)
    assert PowerSpec.from_dict(spec.to_dict()) == spec


def test_an_unknown_table_key_names_the_declared_ones() -> None:
    with pytest.raises(ValueError, match="replicate") as err:
        PowerSpec.from_dict({"replicate": 10})
    assert "did you mean 'replicates'" in str(err.value)
