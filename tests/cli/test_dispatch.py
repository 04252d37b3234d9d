"""The command line: every command parses and shows its help, modules load only to run, and the
domain code never reaches back into the command line."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from voicegate.cli import DESCRIPTION, HELP, build_parser, command

PACKAGE = ROOT / "voicegate"
LAB = ROOT / "lab" / "voicegate_lab"


@pytest.mark.parametrize("name", sorted(HELP))
def test_every_command_shows_its_help_and_exits_0(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        build_parser(name).parse_args([name, "--help"])
    assert stop.value.code == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"usage: voicegate {name} ") and HELP[name] in shown


def test_the_top_level_help_opens_with_what_voicegate_is_and_where_to_start(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    opening = " ".join(capsys.readouterr().out.split("\n\n")[1].split())
    assert opening == DESCRIPTION
    # for someone who just installed it: no markup, the first command to try
    assert "``" not in opening and "voicegate demo" in opening


def test_an_unknown_command_has_no_runner() -> None:
    with pytest.raises(KeyError):
        command("nosuch")


def test_the_top_level_help_loads_no_command_group() -> None:
    probe = (
        "import sys\n"
        "from voicegate.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('voicegate.cli.')), file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.startswith("usage: voicegate")
    assert done.stderr.strip() == "[]"


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_no_domain_module_imports_the_command_line_or_argparse() -> None:
    # The lab's evaluation kit and benchmarks count as domain code too: only its cli/ parses.
    domain = [
        p
        for package in (PACKAGE, LAB)
        for p in package.rglob("*.py")
        if package / "cli" not in p.parents
    ]
    assert domain
    command_lines = ("voicegate.cli", "voicegate_lab.cli")
    offenders = {
        str(p.relative_to(ROOT)): sorted(
            m for m in imports_of(p) if m == "argparse" or m.startswith(command_lines)
        )
        for p in domain
    }
    assert {p: ms for p, ms in offenders.items() if ms} == {}
