"""Sphinx configuration of the tomstats documentation (MyST Markdown pages + autodoc).

Build: ``sphinx-build -W -b html docs docs/_build/html``; run every example:
``sphinx-build -W -b doctest docs docs/_build/doctest``.
"""

from __future__ import annotations

import os

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import doctest  # noqa: E402
import sys  # noqa: E402

from tomstats import __version__  # noqa: E402

# Doctest outputs are compared as a reader compares them: a number may differ by one unit of
# its last printed digit (the last bits of a sum differ between machines), everything else is
# compared as usual (docs/printed.py). Sphinx's doctest runner takes the module's checker.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from printed import NumbersChecker  # noqa: E402

doctest.OutputChecker = NumbersChecker

project = "tomstats"
author = "the tomstats authors"
copyright = "tomstats authors, MIT licence"
version = release = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "sphinx.ext.napoleon",
    # MathJax itself ships with the build (the pinned `sphinx-mathjax-offline` of the `docs`
    # extra copies it to _static/mathjax): the maths renders offline, never from a CDN
    "sphinx-mathjax-offline",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3

autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autosummary_generate = False
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
# Parameter types such as "path" or "str or path" are plain words to the reader; the Python
# domain still tries them as cross-references and finds several attributes named ``path``
# (StudyConfig.path, PowerSpec.path). Such ambiguous look-ups are not errors in the docs.
suppress_warnings = ["ref.python"]

# Docstring examples (``>>>`` blocks pulled in by autodoc) run too, each module's examples
# with that module's public names in scope, as they would be in the module itself.
doctest_global_setup = """
import os
os.environ.setdefault("MPLBACKEND", "Agg")
import numpy as np
import pandas as pd
import importlib as _importlib
for _m in ("tomstats", "tomstats.model", "tomstats.design", "tomstats.analysis.row_anova",
           "tomstats.simulation.count_anova", "tomstats.simulation.simulator",
           "tomstats.simulation.paper", "tomstats.simulation.figures", "tomstats.planning.figure",
           "tomstats.glmm", "tomstats.stories", "tomstats.evaluate", "tomstats.report"):
    try:
        _mod = _importlib.import_module(_m)
    except ImportError:
        continue
    globals().update({_k: getattr(_mod, _k) for _k in getattr(_mod, "__all__", ())})
"""

html_theme = "alabaster"
html_title = f"tomstats {release}"
html_static_path: list[str] = []
