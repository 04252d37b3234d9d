"""The file graphs of the package and of the lab have no import circles (read with ast, nothing
imported)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "voicegate"
# The evaluation kit and the benchmarks: a package of their own, on top of ``voicegate``.
LAB = PACKAGE.parent / "lab" / "voicegate_lab"


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {_module_name(path, package): path for path in sorted(package.rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of a dotted name that is a module of the package."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _imports(module: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, str, int]]:
    """Each import of a package module in ``path``: the module, the name taken, the line."""
    is_package = path.name == "__init__.py"
    # ast.walk reaches imports inside functions and under `if TYPE_CHECKING:` alike.
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, modules)
                if target is not None and target != module:
                    yield target, alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                # `from pkg import mod` takes the submodule, not the package.
                target = _resolve(f"{source}.{alias.name}", modules) or _resolve(source, modules)
                if target is not None and target != module:
                    yield target, alias.name, node.lineno


def _edges(module: str, path: Path, modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each package module this one imports, with the names it takes from it."""
    edges: dict[str, set[str]] = {}
    for target, name, _ in _imports(module, path, modules):
        edges.setdefault(target, set()).add(name)
    return edges


@cache
def _graph(package: Path = PACKAGE) -> dict[str, dict[str, set[str]]]:
    """Each module of ``package``, with the modules of it it imports and the names it takes."""
    modules = _modules(package)
    return {name: _edges(name, path, modules) for name, path in modules.items()}


def _circles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """Strongly connected components of more than one file (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _describe(component: list[str], graph: dict[str, dict[str, set[str]]]) -> str:
    lines = [f"circle of {len(component)} files: {', '.join(component)}"]
    for source in component:
        for target in sorted(set(graph[source]) & set(component)):
            names = ", ".join(sorted(graph[source][target]))
            lines.append(f"  {source} -> {target}: {names}")
    return "\n".join(lines)


@pytest.mark.parametrize("package", [PACKAGE, LAB], ids=["voicegate", "voicegate_lab"])
def test_package_modules_import_each_other_without_circles(package: Path) -> None:
    graph = _graph(package)
    circles = _circles(graph)
    assert not circles, "\n".join(_describe(c, graph) for c in circles)


def test_relative_and_type_checking_imports_count_as_edges(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text("")
    for name in ("b", "c"):
        (tmp_path / f"{name}.py").write_text("")
    a = tmp_path / "a.py"
    a.write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import c\n"
        "if TYPE_CHECKING:\n"
        "    from .b import Thing\n"
    )
    modules = {f"pkg.{n}": tmp_path / f"{n}.py" for n in ("a", "b", "c")}
    modules["pkg"] = tmp_path / "__init__.py"
    assert _edges("pkg.a", a, modules) == {"pkg.b": {"Thing"}, "pkg.c": {"c"}}


def test_a_circle_is_found_with_its_files() -> None:
    assert _circles({"a": {"b": {"x"}}, "b": {"a": {"y"}}, "c": {}}) == [["a", "b"]]
    assert _circles({"a": {"b": {"x"}}, "b": {}}) == []
    assert len(_graph()) > 20
