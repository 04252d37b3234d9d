"""The package's layers point one way (read with ast, nothing imported).

Each subpackage of ``voicegate`` and each module at its top is one unit. ``LAYERS`` lists them
from the top down: a unit may import units of the layers below its own, never one of its own
layer or of a layer above. A back edge fails with its file and line.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache

import pytest

from tests.test_import_circles import PACKAGE, _circles, _imports, _modules

# From the top down. Units of one layer know nothing of each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli",),  # the command line: one module per command group
    ("bench",),  # the benchmarks, one module per figure
    ("eval",),  # measuring a server, in process or running
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
# ``voicegate/__init__.py`` hands each public name on from its home, loading it on first use;
# an import of such a name counts as one of its home, ``__version__`` as one of the bottom.
FACE = "voicegate"


def _unit(module: str) -> str:
    """The unit a module belongs to: its subpackage, or itself at the top of the package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else FACE


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


def _rank() -> dict[str, int]:
    """Each unit's layer, counted from the bottom; the face sits at the bottom."""
    rank = {unit: len(LAYERS) - i for i, layer in enumerate(LAYERS) for unit in layer}
    return {**rank, FACE: 0}


def _unit_edges() -> list[tuple[str, str, str, int, str]]:
    """Every import between two units: (from, to, file, line, what it takes)."""
    modules = _modules()
    homes = _face_homes()
    found = []
    for module, path in modules.items():
        if module == FACE:
            continue  # its imports are its public names, loaded on first use
        source = _unit(module)
        for target, name, line in _imports(module, path, modules):
            if target == FACE and name in homes:
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


def test_every_unit_of_the_package_has_a_layer() -> None:
    placed = [unit for layer in LAYERS for unit in layer]
    assert len(placed) == len(set(placed)), "a unit stands in two layers"
    units = {_unit(module) for module in _modules()} - {FACE}
    assert units == set(placed), f"unplaced: {units - set(placed)}, gone: {set(placed) - units}"


def test_no_unit_imports_its_own_layer_or_one_above() -> None:
    back = _back_edges(_unit_edges(), _rank())
    assert not back, "imports against the layers:\n" + "\n".join(back)


def test_the_units_import_each_other_without_circles() -> None:
    graph: dict[str, dict[str, set[str]]] = {unit: {} for unit in _rank()}
    for source, target, _, _, taken in _unit_edges():
        graph[source].setdefault(target, set()).add(taken)
    assert _circles(graph) == []


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
