"""The package's layers point one way (read with ast, nothing imported).

Each subpackage of ``voicegate`` and each module at its top is one unit. ``LAYERS`` lists them
from the top down: a unit may import units of the layers below its own, never one of its own
layer or of a layer above. A back edge fails with its file and line. The lab
(``voicegate_lab``: the evaluation kit and the benchmarks) sits on top of the whole package, its
own units in ``LAB_LAYERS``; the package reaches it only through the command line's hook.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from tests.test_import_circles import LAB, PACKAGE, _circles, _imports, _modules

Layers = tuple[tuple[str, ...], ...]

# From the top down. Units of one layer know nothing of each other.
LAYERS: Layers = (
    ("cli",),  # the command line: one module per command group
    ("web",),  # the FastAPI app, the /approve page, running the server
    ("device", "mcp"),  # the two adapters
    ("services", "housekeeping", "hearing"),  # what the adapters share and run
    ("settings",),  # the operator's choices, one frozen config passed whole
    ("notify",),  # notices to the user: Web Push, webhooks, mail
    ("gate", "voice"),  # the gate; the voice path, which knows no gate
    ("limits",),  # budgets, taken from the store
    ("store",),  # the storage protocols and their backends
    ("passkey", "receipts", "tokens"),  # pure cores: WebAuthn, receipt chains, tokens
    ("secrets", "extras"),  # key rings; the optional extras
    ("domain", "errors", "observe"),  # domain types and enums, errors, what the gate tells
    ("reasons", "canonical", "clock", "faults", "text"),  # values that import nothing
)
# The lab, from the top down; any of it may import any of ``voicegate``.
LAB_LAYERS: Layers = (
    ("cli",),  # ``voicegate eval`` and ``voicegate bench``, loaded by ``voicegate.cli``
    ("bench",),  # the benchmarks, one module per figure
    ("eval",),  # measuring a server, in process or running
)
PACKAGES = pytest.mark.parametrize(
    ("package", "layers"),
    [(PACKAGE, LAYERS), (LAB, LAB_LAYERS)],
    ids=["voicegate", "voicegate_lab"],
)
# ``voicegate/__init__.py`` hands each public name on from its home, loading it on first use;
# an import of such a name counts as one of its home, ``__version__`` as one of the bottom.
FACE = "voicegate"


def _unit(module: str) -> str:
    """The unit a module belongs to: its subpackage, or itself at the top of the package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


@cache
def _face_homes() -> dict[str, str]:
    """Each name the package's face hands on, with the module it comes from."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    return {
        alias.asname or alias.name: node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


def _rank(layers: Layers = LAYERS, face: str = FACE) -> dict[str, int]:
    """Each unit's layer, counted from the bottom; the face sits at the bottom."""
    rank = {unit: len(layers) - i for i, layer in enumerate(layers) for unit in layer}
    return {**rank, face: 0}


def _unit_edges(package: Path = PACKAGE) -> list[tuple[str, str, str, int, str]]:
    """Every import between two units of ``package``: (from, to, file, line, what it takes)."""
    modules = _modules(package)
    face = package.name
    homes = _face_homes() if package == PACKAGE else {}
    found = []
    for module, path in modules.items():
        if module == face:
            continue  # its imports are its public names, loaded on first use
        source = _unit(module)
        for target, name, line in _imports(module, path, modules):
            if target == face and name in homes:
                target = homes[name]
            if _unit(target) != source:
                where = str(path.relative_to(PACKAGE.parent))
                found.append((source, _unit(target), where, line, f"{target}.{name}"))
    return found


def _back_edges(edges: list[tuple[str, str, str, int, str]], rank: dict[str, int]) -> list[str]:
    return [
        f"{where}:{line}: {source} (layer {rank[source]}) imports {taken} "
        f"({target}, layer {rank[target]})"
        for source, target, where, line, taken in edges
        if rank[target] >= rank[source]
    ]


@PACKAGES
def test_every_unit_of_the_package_has_a_layer(package: Path, layers: Layers) -> None:
    placed = [unit for layer in layers for unit in layer]
    assert len(placed) == len(set(placed)), "a unit stands in two layers"
    units = {_unit(module) for module in _modules(package)} - {package.name}
    assert units == set(placed), f"unplaced: {units - set(placed)}, gone: {set(placed) - units}"


@PACKAGES
def test_no_unit_imports_its_own_layer_or_one_above(package: Path, layers: Layers) -> None:
    back = _back_edges(_unit_edges(package), _rank(layers, package.name))
    assert not back, "imports against the layers:\n" + "\n".join(back)


@PACKAGES
def test_the_units_import_each_other_without_circles(package: Path, layers: Layers) -> None:
    graph: dict[str, dict[str, set[str]]] = {unit: {} for unit in _rank(layers, package.name)}
    for source, target, _, _, taken in _unit_edges(package):
        graph[source].setdefault(target, set()).add(taken)
    assert _circles(graph) == []


def _lab_imports(path: Path) -> list[str | None]:
    """For each import of the lab in ``path``, the function it sits in (None: at the top)."""
    found: list[str | None] = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                names = [child.module or ""]
            else:
                names = []
            if any(n == LAB.name or n.startswith(f"{LAB.name}.") for n in names):
                found.append(function)
            inside = child.name if isinstance(child, ast.FunctionDef) else function
            visit(child, inside)

    visit(ast.parse(path.read_text(encoding="utf-8")), None)
    return found


def test_the_package_imports_the_lab_only_in_the_command_lines_hook() -> None:
    # Anywhere else, the wheel (which leaves the lab out) would fail on an import.
    found = {
        (str(path.relative_to(PACKAGE.parent)), function)
        for path in _modules().values()
        for function in _lab_imports(path)
    }
    assert found == {("voicegate/cli/__init__.py", "_lab")}


def test_a_back_edge_is_named_with_its_file_and_line() -> None:
    rank = {"gate": 2, "store": 1, FACE: 0}
    edges = [
        ("gate", "store", "voicegate/gate/core.py", 3, "voicegate.store.base.Store"),
        ("store", "gate", "voicegate/store/memory.py", 7, "voicegate.gate.core.Gate"),
    ]
    assert _back_edges(edges, rank) == [
        "voicegate/store/memory.py:7: store (layer 1) imports voicegate.gate.core.Gate "
        "(gate, layer 2)"
    ]


def test_the_face_imports_its_names_only_for_the_type_checker() -> None:
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    at_runtime = [
        node.lineno
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
        and any(
            (getattr(node, "module", None) or alias.name).startswith("voicegate")
            for alias in node.names
        )
    ]
    assert at_runtime == []


@pytest.mark.parametrize(
    ("module", "absent"),
    [
        ("voicegate.voice.consent", ("starlette", "fastapi", "voicegate.store", "voicegate.gate")),
        ("voicegate.gate.core", ("starlette", "fastapi")),
        ("voicegate", ("starlette", "fastapi", "voicegate.store", "voicegate.gate")),
        ("voicegate.cli", ("voicegate_lab",)),
    ],
)
def test_importing_a_module_loads_nothing_of_the_layers_it_does_not_use(
    module: str, absent: tuple[str, ...]
) -> None:
    probe = (
        f"import sys, {module}; "
        f"print('\\n'.join(m for m in sys.modules if m.startswith({absent!r})))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == []
