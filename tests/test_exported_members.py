"""The public API is exactly what ``voicegate.__all__`` lists, sorted, and every name exists."""

from __future__ import annotations

import importlib
import subprocess
import sys

import voicegate


def test_all_exports_are_sorted_and_present() -> None:
    assert voicegate.__all__ == sorted(voicegate.__all__, key=lambda n: (not n.isupper(), n))
    for name in voicegate.__all__:
        assert hasattr(voicegate, name), name


def test_every_public_member_is_exported() -> None:
    public = {
        name
        for name, value in vars(voicegate).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("voicegate")
    }
    assert public <= set(voicegate.__all__)


def test_importing_the_package_does_not_load_the_recogniser_or_the_web_stack() -> None:
    probe = (
        "import sys, voicegate; "
        "print(','.join(m for m in ('fastapi','ctranslate2','faster_whisper') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_export_names_the_module_it_comes_from() -> None:
    assert sorted(voicegate._HOME) == sorted(voicegate.__all__)
    for name, home in voicegate._HOME.items():
        assert getattr(importlib.import_module(home), name) is getattr(voicegate, name), name
