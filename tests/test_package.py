"""The package's arrangement: imports point down a declared stack, with no circles, and the
package face and the light commands start without JAX (nor the face without SciPy or pandas).

The import graph is read from the source with :mod:`ast` (every ``import`` and ``from ...
import``, at the top of a file or inside a function, but not those under ``if TYPE_CHECKING:``,
which never run), so a lazy import counts as much as an eager one. The start-up checks run each
command in a fresh interpreter and read ``sys.modules`` at exit.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import tomstats

ROOT = Path(tomstats.__file__).resolve().parent
REPO = ROOT.parent
SHIPPED_LOG = REPO / "data" / "smollm2_storysim_log.jsonl"

#: The stack, bottom first: a module may import modules of its own floor or of floors below.
#: A package name stands for all of its modules.
STACK: tuple[tuple[str, ...], ...] = (
    # small private helpers (every ``tomstats._name`` module: _version, _io, _validate, ...)
    # and the command table (which names its commands' modules as strings only)
    ("tomstats._*", "tomstats.cli"),
    ("tomstats.model", "tomstats.design"),  # equation (1) and designs, shared by every stage
    ("tomstats.stories",),
    ("tomstats.evaluate",),
    ("tomstats.analysis",),
    ("tomstats.glmm",),
    ("tomstats.simulation",),
    ("tomstats.planning",),
    ("tomstats.report",),
    ("tomstats", "tomstats.__main__"),  # the package face and ``python -m tomstats``
)

HEAVY = ("jax", "jaxlib", "scipy", "pandas", "xarray", "matplotlib", "arviz", "numpyro", "pymc")
#: What only a run of the evaluation runner needs: the HTTP client and the backends.
RUNNER = ("httpx", "tomstats.evaluate.backends", "tomstats.evaluate.run")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The tomstats modules ``name`` imports (``from pkg import module`` names the module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                   for stmt in block.body for n in ast.walk(stmt)}  # never run: not an edge
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "tomstats")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "tomstats":
                continue
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.add(sub if sub in known else mod)
    return {m for m in out if m in known and m != name}


def _floor(module: str) -> int:
    if module.count(".") == 1 and module.split(".")[1].startswith("_") \
            and module != "tomstats.__main__":
        return 0  # "tomstats._*": a private helper at the top of the package
    best = (-1, -1)  # (length of the matching entry, floor)
    for i, floor in enumerate(STACK):
        for entry in floor:
            if (module == entry or module.startswith(entry + ".")) and len(entry) > best[0]:
                best = (len(entry), i)
    if best[1] < 0:
        raise AssertionError(f"{module} is on no floor of STACK: add it")
    return best[1]


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {name: _imports(name, path, known) for name, path in mods.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_module_is_on_a_floor() -> None:
    for name in _modules():
        _floor(name)


def test_no_import_runs_up_the_stack() -> None:
    graph = _graph()
    up = [f"{a} -> {b}" for a, deps in sorted(graph.items()) for b in sorted(deps)
          if _floor(b) > _floor(a)]
    assert up == []


def test_no_module_imports_the_package_face() -> None:
    graph = _graph()
    assert [a for a, deps in sorted(graph.items()) if "tomstats" in deps] == []


def test_no_circles() -> None:
    assert _circles(_graph()) == []


def test_the_graph_reader_sees_circles_and_upward_imports() -> None:
    """The checks above can fail: a made-up circle and a made-up upward import are found."""
    graph = {"tomstats.model": {"tomstats.design"}, "tomstats.design": {"tomstats.model"},
             "tomstats.report.cli": set()}
    assert _circles(graph) == [["tomstats.design", "tomstats.model"]]
    assert _floor("tomstats.report.cli") > _floor("tomstats.glmm.fitting")
    assert _floor("tomstats.analysis.table") < _floor("tomstats.glmm.cli")


def _shadows(public: dict[str, set[str]], modules: set[str]) -> list[str]:
    """``package.name`` for each public name of a package that also names one of its modules
    (``public``: each package's ``__all__``)."""
    return [f"{pkg}.{name}" for pkg, names in sorted(public.items())
            for name in sorted(names) if f"{pkg}.{name}" in modules]


def test_no_function_shadows_its_module() -> None:
    """A public name of a package never also names one of its modules (``tomstats.power`` is
    the function; the planning stage is ``tomstats.planning``; ``tomstats.glmm.fit`` is the
    function, its module ``tomstats.glmm.fitting``). Every package is checked."""
    import importlib

    mods = _modules()
    packages = sorted(n for n, p in mods.items() if p.name == "__init__.py")
    assert {"tomstats", "tomstats.stories", "tomstats.evaluate"} <= set(packages)
    public = {pkg: set(getattr(importlib.import_module(pkg), "__all__", ()))
              for pkg in packages}
    assert _shadows(public, set(mods)) == []


def test_the_shadow_check_sees_a_shadow() -> None:
    """The check above can fail: a function exported beside its module of the same name."""
    mods = {"tomstats.stories", "tomstats.stories.weave", "tomstats.stories.weaving"}
    assert _shadows({"tomstats.stories": {"weave", "Item"}}, mods) == ["tomstats.stories.weave"]


def _run(code: str, timeout: float = 300,
         watch: tuple[str, ...] = HEAVY) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter: ``heavy`` lists the ``watch`` modules it imported."""
    probe = (f"import sys, json\n{code}\n"
             f"print(json.dumps(sorted(m for m in {watch!r} if m in sys.modules)))")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=REPO, timeout=timeout)
    assert res.returncode == 0, res.stderr
    return {"heavy": json.loads(res.stdout.strip().splitlines()[-1]), "out": res.stdout}


def test_the_face_imports_no_heavy_dependency() -> None:
    got = _run("import tomstats\nnames = dir(tomstats)")
    assert got["heavy"] == []


def test_the_face_reaches_every_public_name_lazily() -> None:
    code = ("import tomstats\n"
            "assert set(tomstats.__all__) <= set(dir(tomstats))\n"
            "for n in tomstats.__all__:\n"
            "    getattr(tomstats, n)\n"
            "import tomstats.planning.run, tomstats.analysis.row_anova\n"
            "assert tomstats.power is tomstats.planning.run.power\n"
            "assert tomstats.anova is tomstats.analysis.row_anova.anova\n"
            "assert callable(tomstats.simulate) and callable(tomstats.sensitivity)\n")
    got = _run(code)
    assert "jax" in got["heavy"]  # the check can fail: the names did load their modules
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tomstats.nope  # noqa: B018


def test_the_runner_face_is_lazy() -> None:
    """``tomstats.evaluate`` imports a name's module on first use: reading a log does not
    load the HTTP client or the backends; every public name is reachable and listed."""
    got = _run("import tomstats.evaluate as e\nnames = dir(e)\ne.read_log\n"
               "assert 'httpx' not in sys.modules\n"
               "assert set(e.__all__) == set(dir(e))\n"
               "for n in e.__all__:\n    getattr(e, n)\n", watch=RUNNER)
    assert set(got["heavy"]) == set(RUNNER)  # the check can fail: the names loaded them


@pytest.mark.parametrize("argv", [
    ["--help"],
    ["stories", "--help"],
    ["summarize", "--help"],
    ["stories", "--design", "paper", "--n", "1", "--out", "{tmp}/items.jsonl"],
    ["summarize", str(SHIPPED_LOG)],
], ids=["help", "stories-help", "summarize-help", "stories", "summarize"])
def test_light_commands_start_without_jax(argv: list[str], tmp_path: Path) -> None:
    if str(SHIPPED_LOG) in argv and not SHIPPED_LOG.is_file():
        pytest.skip(f"the shipped log {SHIPPED_LOG.name} is not in this checkout")
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code = ("import sys\nfrom tomstats.cli import main\n"
            f"sys.argv = ['tomstats', *{args!r}]\n"
            "try:\n    rc = main()\nexcept SystemExit as e:\n    rc = e.code or 0\n"
            "assert rc == 0, rc\n")
    got = _run(code, watch=(*HEAVY, *RUNNER))
    assert not {"jax", *RUNNER} & set(got["heavy"]), got["heavy"]


#: What the help of the model commands must not load: the samplers' stack (ArviZ brings
#: matplotlib and numba), xarray's netCDF files, and JAX for ``fit --help``.
SAMPLER_STACK = ("arviz", "xarray", "numpyro", "pymc")


@pytest.mark.parametrize("command, unloaded", [
    ("fit", ("jax", "jaxlib", "matplotlib", *SAMPLER_STACK)),
    # report --help still reads the sweep's default draws from report.posterior_sweep,
    # whose figures import the simulator (JAX); the fit reports' ArviZ stays unloaded
    ("report", SAMPLER_STACK),
])
def test_model_commands_help_starts_light(command: str, unloaded: tuple[str, ...]) -> None:
    code = ("import sys\nfrom tomstats.cli import main\n"
            f"sys.argv = ['tomstats', {command!r}, '--help']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n")
    got = _run(code, watch=unloaded + ("pandas",))
    assert set(got["heavy"]) == {"pandas"}, got["heavy"]  # the check can fail: pandas loads
    assert "usage: tomstats " + command in got["out"]
