"""The import layers of DESIGN.md ("Packages", "Contracts"): every module's imports, function-level
ones included, parsed with ast (nothing is imported), checked against the order below."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "robosafe"

#: lowest first: a package may import its own modules and those of lower layers, never a
#: package of its own layer or a higher one. The shared helpers sit at the bottom.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "log"),
    ("textio", "outputs", "redact", "yamldata", "mjstate", "budget"),
    ("trace",),
    ("safety",),
    ("stats",),
    ("tasks",),
    ("sim",),             # the CBDDL world: neither hosts nor policies
    ("hosts",),           # adapters of simulators someone else owns; the host contract
    ("formats",),
    ("policies",),
    ("runner",),          # the one episode path: envs come from the host registry
    ("audit", "grounding", "report"),
    ("cli",),
    ("__main__",),
)
RANK = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}

#: host envs are made through robosafe.hosts.registry.make_env; these names are imported only
#: inside hosts (and the world's own `robosafe sim state` export, which needs no host)
ENV_CLASSES = {"TaskEnv", "RobosafeEnv", "LiberoEnv", "RobosuiteEnv"}
ENV_IMPORTERS = {"hosts", "sim"}
ENV_EXCEPTIONS = {"cli/sim.py": {"TaskEnv"}}


def _package(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, imported robosafe module, names) of every import statement in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: resolve against the file's own package
                base = parts[:-node.level] if path.name != "__init__.py" or node.level > 1 \
                    else parts[:-1]
                module = ".".join([*base, module] if module else base)
            out.append((node.lineno, module, tuple(a.name for a in node.names)))
    return [(line, m, names) for line, m, names in out
            if m == "robosafe" or m.startswith("robosafe.")]


def _target(module: str, names: tuple[str, ...]) -> list[str]:
    """The robosafe packages an import reaches (``from robosafe import sim`` reaches sim)."""
    parts = module.split(".")
    if len(parts) > 1:
        return [parts[1]]
    return [n for n in names if n in RANK]


MODULES = sorted(SRC.rglob("*.py"))


def test_every_package_has_a_layer():
    packages = {_package(p) for p in MODULES} - {"__init__"}
    assert packages <= set(RANK), sorted(packages - set(RANK))


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(SRC)) for p in MODULES])
def test_imports_follow_the_layer_order(path):
    own = _package(path)
    if own == "__init__":  # the package root re-exports nothing from the layers
        own_rank = -1
    else:
        own_rank = RANK[own]
    bad = []
    for line, module, names in _imports(path):
        for target in _target(module, names):
            if target != own and RANK.get(target, -1) >= own_rank:
                bad.append(f"line {line}: {module} ({target}, layer {RANK.get(target)}) from "
                           f"{own} (layer {own_rank})")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(SRC)) for p in MODULES])
def test_host_envs_come_from_the_registry(path):
    rel = str(path.relative_to(SRC))
    if _package(path) in ENV_IMPORTERS:
        return
    allowed = ENV_EXCEPTIONS.get(rel, set())
    bad = [f"line {line}: {name} from {module}" for line, module, names in _imports(path)
           for name in names if name in ENV_CLASSES - allowed]
    assert not bad, "make host envs with robosafe.hosts.registry.make_env:\n" + "\n".join(bad)


def test_the_checker_sees_function_level_and_relative_imports(tmp_path, monkeypatch):
    """A sim module importing hosts inside a function, or a trace module importing runner
    relatively, is caught (the files are written here, under a copy of the layout)."""
    root = tmp_path / "robosafe"
    (root / "sim").mkdir(parents=True)
    (root / "trace").mkdir()
    (root / "sim" / "bad.py").write_text("def f():\n    from robosafe.hosts import recorder\n")
    (root / "trace" / "bad.py").write_text("from ..runner import run\n")
    monkeypatch.setattr(__import__(__name__), "SRC", root)
    with pytest.raises(AssertionError, match="line 2: robosafe.hosts \\(hosts"):
        test_imports_follow_the_layer_order(root / "sim" / "bad.py")
    with pytest.raises(AssertionError, match="line 1: robosafe.runner \\(runner"):
        test_imports_follow_the_layer_order(root / "trace" / "bad.py")


# ------------------------------------------------------------------------- no import cycles

def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_graph(src: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (function-level ones included;
    ``from robosafe.x import y`` reaches module x.y when there is one, else x's __init__)."""
    files = {_module_name(p): p for p in sorted(src.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        reached: set[str] = set()
        for _, module, names in _imports(path):
            subs = [f"{module}.{n}" for n in names if f"{module}.{n}" in files]
            reached.update(subs)
            if (len(subs) < len(names) or not names) and module in files:
                reached.add(module)
        reached.discard(name)
        graph[name] = reached
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_modules_import_each_other():
    """No import cycle inside the package, however long: a module's imports can be read
    without reading the module back (docs/design.md, "Packages")."""
    assert _cycles(_module_graph(SRC)) == []


def test_the_cycle_check_finds_a_cycle_through_a_package_init(tmp_path, monkeypatch):
    root = tmp_path / "robosafe"
    (root / "cli").mkdir(parents=True)
    (root / "cli" / "__init__.py").write_text("from robosafe.cli import run as _run\n")
    (root / "cli" / "run.py").write_text("def f():\n    from robosafe.cli import app\n")
    (root / "cli" / "ok.py").write_text("from robosafe.cli import run\n")
    monkeypatch.setattr(__import__(__name__), "SRC", root)
    assert _cycles(_module_graph(root)) == [["robosafe.cli", "robosafe.cli.run"]]
