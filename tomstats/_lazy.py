"""Package faces that import a public name's module on first use (:pep:`562`).

``tomstats.glmm`` and ``tomstats.report`` list their public names with the module of each;
:func:`lazy_face` gives the package its ``__getattr__``, ``__dir__`` and ``__all__``, so that
importing the package (or one light module of it, which runs the package's ``__init__``)
loads nothing heavy: ``tomstats fit --help`` starts without ArviZ or JAX.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_face"]


def lazy_face(package: str, names: Mapping[str, str | tuple[str, str]]
              ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` of ``package``.

    ``names`` maps each public name to the module that defines it, or to ``(module, name
    there)`` when the package exports it under another name. A name's first use imports its
    module and stores the value in the package, so later look-ups skip ``__getattr__``.
    """
    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        where = names[name]
        module, attr = (where, name) if isinstance(where, str) else where
        value = getattr(importlib.import_module(module), attr)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__, sorted(names)
