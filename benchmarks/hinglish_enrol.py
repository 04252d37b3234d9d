"""Hinglish answers taught in the voice that says them: an eval manifest, with and without.

    .venv/bin/python benchmarks/hinglish_enrol.py --out bench-out/hinglish-enrol
    .venv/bin/voicegate eval --manifest bench-out/hinglish-enrol/manifest.jsonl \
        --lang en --lang hi --json bench-out/hinglish-enrol/enrolled.json
    .venv/bin/voicegate eval --manifest bench-out/hinglish-enrol/manifest-plain.jsonl \
        --lang en --lang hi --json bench-out/hinglish-enrol/plain.json

Four espeak-ng voices, each a user of its own: the Hindi voice and its female variant say the
answers in Devanagari, two English voices say them in Latin letters, as an English speaker
reads Hinglish. Each user teaches "haan" and "theek hai" (yes), "doosra" (the second card) and
"ruko" (wait) three times each (``"enrol": true`` lines, speed and pitch varied), then answers:
each taught word twice more at other speeds and pitches (yes and wait at the final card,
"doosra" among three cards), and eight words or phrases that must release nothing, each on
three cards and at the final card: hedges ("shayad", "pata nahin"), a contradiction ("haan
nahin"), a negation ("doosra nahin"), a question ("kya") and other words ("paani", "kal",
"ghar"). ``manifest-plain.jsonl`` is the same cases with no enrolment. Synthetic speech only:
it says how the decision treats one consistent voice, not a person.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

# (espeak-ng voice, manifest language, the script its words are written in)
VOICES = (("hi", "hi-Deva"), ("hi+f3", "hi-Deva"), ("en-us", "hi-Latn"), ("en-gb", "hi-Latn"))
# (Latin, Devanagari, the answer it teaches, cards, stage)
TAUGHT_WORDS = (
    ("haan", "हाँ", "confirm", 1, "final"),
    ("theek hai", "ठीक है", "confirm", 1, "final"),
    ("doosra", "दूसरा", "choose:2", 3, "choose"),
    ("ruko", "रुको", "more_time", 1, "final"),
)
# (Latin, Devanagari, the manifest class of the refusal)
OTHERS = (
    ("shayad", "शायद", "hedge"),
    ("pata nahin", "पता नहीं", "hedge"),
    ("haan nahin", "हाँ नहीं", "contradiction"),
    ("doosra nahin", "दूसरा नहीं", "negation"),
    ("kya", "क्या", "question"),
    ("paani", "पानी", "oov"),
    ("kal", "कल", "oov"),
    ("ghar", "घर", "oov"),
)
TAUGHT = ((140, 40), (160, 50), (180, 60))  # espeak-ng words a minute, pitch 0-99
ANSWERS = ((150, 55), (170, 45))
# Where each refusal is said: among three cards, and at the final card.
PLACES = ((3, "choose"), (1, "final"))


def say(folder: Path, name: str, text: str, voice: str, speed: int, pitch: int) -> str:
    """One espeak-ng clip; its path relative to the manifest."""
    path = folder / "clips" / f"{name}.wav"
    cmd = ["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", str(path), text]
    subprocess.run(cmd, check=True)
    return f"clips/{name}.wav"


def rows_for(folder: Path, v: int, voice: str, lang: str) -> list[dict[str, object]]:
    """One user's enrolment lines, then their cases."""
    user = f"h{v}"
    rows: list[dict[str, object]] = []

    def add(name: str, words: tuple[str, str], speed: int, pitch: int, **line: object) -> None:
        text = words[1] if lang == "hi-Deva" else words[0]
        audio = say(folder, f"{user}-{name}", text, voice, speed, pitch)
        rows.append({"id": f"{user}-{name}", "audio": audio, **line, "user": user})

    for latin, devanagari, expect, _, _ in TAUGHT_WORDS:
        for k, (speed, pitch) in enumerate(TAUGHT):
            add(f"enrol-{_slug(latin)}-{k}", (latin, devanagari), speed, pitch,
                expect=expect, enrol=True)  # fmt: skip
    for latin, devanagari, expect, cards, stage in TAUGHT_WORDS:
        for k, (speed, pitch) in enumerate(ANSWERS):
            add(f"genuine-{_slug(latin)}-{k}", (latin, devanagari), speed, pitch, expect=expect,
                **{"class": "genuine"}, cards=cards, stage=stage, lang=lang)  # fmt: skip
    for latin, devanagari, kind in OTHERS:
        for cards, stage in PLACES:
            add(f"other-{_slug(latin)}-{stage}", (latin, devanagari), 160, 50, expect="refuse",
                **{"class": kind}, cards=cards, stage=stage, lang=lang)  # fmt: skip
    return rows


def _slug(words: str) -> str:
    return words.replace(" ", "_")


def main() -> int:
    """Write the clips and both manifests under ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    folder = parser.parse_args().out
    (folder / "clips").mkdir(parents=True, exist_ok=True)
    rows = [
        row for v, (voice, lang) in enumerate(VOICES) for row in rows_for(folder, v, voice, lang)
    ]
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    (folder / "manifest.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    plain = [json.dumps(r, ensure_ascii=False) for r in rows if not r.get("enrol")]
    (folder / "manifest-plain.jsonl").write_text("\n".join(plain) + "\n", encoding="utf-8")
    print(f"{len(rows) - len(plain)} enrolment takes, {len(plain)} cases in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
