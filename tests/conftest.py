"""Shared test settings: where the corpus and PostgreSQL are, and failing loudly in CI."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("VOICEGATE_CORPUS", ROOT.parent / "shared" / "corpus"))
FSDD = CORPUS / "fsdd"
FIXTURES = ROOT / "fixtures" / "audio"
PG_DSN = os.environ.get("VOICEGATE_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI", "").lower() == "true"

# A loaded machine must not fail a property on time alone, and CI replays the same examples
# every run; new examples are explored locally.
settings.register_profile("local", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("ci" if IN_CI else "local")


# Markers of tests that need something heavy or slow: the model, the browser, PostgreSQL, the
# corpus, or more than a few seconds. A test with none of them is also marked ``quick``. Plain
# ``pytest`` runs the quick set; ``pytest --full`` (what CI runs) runs every test, and a ``-m``
# expression selects as it says (``-m browser``).
HEAVY = frozenset({"whisper", "browser", "postgres", "slow", "corpus"})


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--full``: run the heavy tests too."""
    parser.addoption(
        "--full",
        action="store_true",
        help="run every test, the heavy ones too (" + ", ".join(sorted(HEAVY)) + "); "
        "without it or -m, only the quick set runs",
    )


def quick_only(config: pytest.Config) -> bool:
    """Whether this run leaves the heavy tests out: neither ``--full`` nor ``-m`` was given."""
    return not (config.getoption("full") or config.getoption("markexpr"))


def pytest_report_header(config: pytest.Config) -> str | None:
    """Say that the heavy tests are left out, and how to run them."""
    if not quick_only(config):
        return None
    marks = ", ".join(sorted(HEAVY))
    return f"quick set: tests marked {marks} are left out (--full runs them)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test without a ``HEAVY`` marker ``quick``; leave the rest out of a quick run."""
    heavy: list[pytest.Item] = []
    for item in items:
        if HEAVY & {mark.name for mark in item.iter_markers()}:
            heavy.append(item)
        else:
            item.add_marker(pytest.mark.quick)
    if heavy and quick_only(config):
        config.hook.pytest_deselected(items=heavy)
        left_out = set(heavy)
        items[:] = [item for item in items if item not in left_out]


def require(condition: bool, what: str) -> None:
    """Skip locally, but fail under CI=true, when something a test needs is missing."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"{what} is missing, and CI=true forbids skipping", pytrace=False)
    pytest.skip(f"{what} is missing")


def training_script(name: str) -> ModuleType:
    """A script of training/ (``answer_model``, ``phones``), imported as the scripts import each
    other: with training/ on the path while it loads."""
    sys.path.insert(0, str(ROOT / "training"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "training"))


@pytest.fixture(scope="session")
def fsdd() -> Path:
    """The real spoken-digit recordings in ../shared/corpus/fsdd."""
    require(FSDD.is_dir() and any(FSDD.glob("*.wav")), f"the FSDD corpus at {FSDD}")
    return FSDD
