"""The extras: a plain install has no test, plotting or PostgreSQL stack, scripts/setup-dev
installs every extra, the lab and the locked dev tools, and a command that needs a missing extra
or the lab says which in one line and exits 2."""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import ROOT
from voicegate.cli import main
from voicegate.errors import DISTRIBUTION, LAB_DISTRIBUTION, ConfigError, MissingExtra
from voicegate.extras import EXTRA_OF, need
from voicegate.store import store_for

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]
GROUPS: dict[str, list[str | dict[str, str]]] = PYPROJECT["dependency-groups"]
LOCK = tomllib.loads((ROOT / "pylock.dev.toml").read_text())
LAB = tomllib.loads((ROOT / "lab" / "pyproject.toml").read_text())["project"]


def names(requirements: list[str]) -> set[str]:
    """The distribution names of ``requirements``, without versions or extras."""
    return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower() for r in requirements}


def group(name: str) -> list[Requirement]:
    """The requirements of dependency group ``name``, its included groups' too."""
    found: list[Requirement] = []
    for entry in GROUPS[name]:
        if isinstance(entry, dict):
            found += group(entry["include-group"])
        else:
            found.append(Requirement(entry))
    return found


class NoLab(MetaPathFinder):
    """Finds no ``voicegate_lab``, whatever is installed: the lab as a plain install lacks it."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname == "voicegate_lab":
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


@pytest.fixture
def no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a plain install: ``import asyncpg`` fails."""
    monkeypatch.setitem(sys.modules, "asyncpg", None)


def test_a_plain_install_has_no_test_plotting_or_postgres_stack() -> None:
    plain = names(PROJECT["dependencies"])
    left_out_all = ("pytest", "hypothesis", "playwright", "matplotlib", "asyncpg", "tqdm", "torch")
    for left_out in left_out_all:
        assert left_out not in plain


def test_each_extra_module_is_installed_by_the_extra_it_names() -> None:
    for module, extra in EXTRA_OF.items():
        assert module in names(EXTRAS[extra])


def test_the_dev_tools_are_a_dependency_group_and_not_an_extra() -> None:
    assert "dev" not in EXTRAS
    assert {r.name for r in group("dev")} == {r.name for r in group("test") + group("lint")}


def test_setup_dev_installs_the_locked_dev_tools_every_extra_and_the_lab() -> None:
    script = (ROOT / "scripts" / "setup-dev").read_text()
    assert "pip install -q -r pylock.dev.toml" in script
    installed = re.findall(r'pip install -q -e "\.\[([a-z,]+)\]" -e lab$', script, re.MULTILINE)
    assert len(installed) == 1
    assert set(installed[0].split(",")) == set(EXTRAS) == {"hindi", "postgres", "train"}


def test_the_lab_is_its_own_distribution_on_top_of_the_package() -> None:
    assert LAB["name"] == LAB_DISTRIBUTION
    assert DISTRIBUTION in names(LAB["dependencies"])
    # The lab's own stack stays out of the server's install.
    assert names(LAB["dependencies"]) - {DISTRIBUTION} == {"matplotlib", "tqdm"}
    assert not names(LAB["dependencies"]) & names(PROJECT["dependencies"])
    assert PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"] == [
        "voicegate",
        "voicegate.*",
    ]


def test_the_lock_pins_every_dev_tool_at_a_version_the_group_allows() -> None:
    locked = {canonicalize_name(p["name"]): Version(p["version"]) for p in LOCK["packages"]}
    for requirement in group("dev"):
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{name} is not in pylock.dev.toml"
        assert requirement.specifier.contains(locked[name]), (name, str(locked[name]))


def test_an_installed_extra_module_is_imported() -> None:
    assert need("asyncpg", "a PostgreSQL store").__name__ == "asyncpg"


@pytest.mark.usefixtures("no_driver")
def test_a_postgresql_url_without_the_driver_is_a_missing_extra() -> None:
    with pytest.raises(MissingExtra) as missing:
        store_for("postgresql://127.0.0.1:1/test")
    assert missing.value.extra == "postgres"
    assert isinstance(missing.value, ConfigError)


@pytest.mark.usefixtures("no_driver")
def test_the_memory_and_sqlite_stores_need_no_driver(tmp_path: Path) -> None:
    assert type(store_for("memory")).__name__ == "MemoryStore"
    assert type(store_for(str(tmp_path / "gate.db"))).__name__ == "SqliteStore"


@pytest.mark.usefixtures("no_driver")
@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--upstream-cmd", "true", "--no-voice"],
        ["demo", "--no-voice", "--port", "0"],
        ["devices", "list"],
        ["receipts", "list"],
    ],
)
def test_a_command_on_postgresql_without_the_driver_names_the_extra_in_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--db", "postgresql://127.0.0.1:1/test"]) == 2
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and "pip install 'voicegate-mcp[postgres]'" in said


@pytest.mark.parametrize(
    "argv", [["eval", "--manifest", "cases.jsonl"], ["bench", "core", "--quick"], ["eval", "-h"]]
)
def test_a_command_of_the_lab_without_the_lab_names_it_in_one_line(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # As in a plain install: no module of the lab loaded, and none to find.
    for name in [m for m in sys.modules if m.split(".")[0] == "voicegate_lab"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [NoLab(), *sys.meta_path])
    assert main(argv) == 2
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and f"needs {LAB_DISTRIBUTION}" in said
    assert "pip install -e lab" in said


def test_the_distribution_is_named_once_and_installs_by_that_name() -> None:
    assert PROJECT["name"] == DISTRIBUTION != "voicegate"
    assert str(MissingExtra("x", "postgres")).endswith(f"pip install '{DISTRIBUTION}[postgres]'")
