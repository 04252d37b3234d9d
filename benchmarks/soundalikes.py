"""Sound-alikes and other words in the voice that taught the cards: an eval manifest.

    .venv/bin/python benchmarks/soundalikes.py --out bench-out/soundalikes
    .venv/bin/voicegate eval --manifest bench-out/soundalikes/manifest.jsonl \
        --json bench-out/soundalikes/enrolled.json
    .venv/bin/voicegate eval --manifest bench-out/soundalikes/manifest-plain.jsonl \
        --json bench-out/soundalikes/plain.json
    .venv/bin/voicegate eval --manifest bench-out/soundalikes/manifest-hard.jsonl \
        --json bench-out/soundalikes/hard.json

Four espeak-ng voices, each a user of its own. Each teaches "one".."five" three times
(``"enrol": true`` lines, speed and pitch varied), then answers a five-card set: every number
twice more at other speeds and pitches (must choose its card), and 24 words that must release
nothing: near misses of the numbers ("tooth", "fife", "tree"), phrases with a number as a
function word ("go to", "for me") and other words ("hello", "door"). ``manifest-plain.jsonl``
is the same cases with no enrolment, so the two runs show what the user's templates change;
``manifest-hard.jsonl`` is ``manifest.jsonl`` with every user saying their speech is hard for
recognisers (``"hard": true`` on their first enrolment line), so a clear template match may
decide alone.
Synthetic speech only: it says how the decision treats one consistent voice, not a person.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

VOICES = ("en-us", "en-gb", "en-us+f3", "en-gb-scotland")
NUMBERS = ("one", "two", "three", "four", "five")
TAUGHT = ((140, 40), (160, 50), (180, 60))  # espeak-ng words a minute, pitch 0-99
ANSWERS = ((150, 55), (170, 45))
OTHERS = (
    "tooth", "tool", "true", "fife", "won ton", "free", "tree", "for me", "me too", "go to",
    "hello", "done", "gun", "sticks", "heaven", "line", "wait what", "door", "hive", "thee",
    "to do", "fork", "fire", "wonder",
)  # fmt: skip


def say(folder: Path, name: str, text: str, voice: str, speed: int, pitch: int) -> str:
    """One espeak-ng clip; its path relative to the manifest."""
    path = folder / "clips" / f"{name}.wav"
    cmd = ["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", str(path), text]
    subprocess.run(cmd, check=True)
    return f"clips/{name}.wav"


def main() -> int:
    """Write the clips and both manifests under ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    folder = parser.parse_args().out
    (folder / "clips").mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, object]] = []
    case = {"cards": 5, "stage": "choose", "lang": "en"}
    for v, voice in enumerate(VOICES):
        user = f"v{v}"
        for card, word in enumerate(NUMBERS, 1):
            for k, (speed, pitch) in enumerate(TAUGHT):
                name = f"{user}-enrol-{word}-{k}"
                rows.append({"id": name, "audio": say(folder, name, word, voice, speed, pitch),
                             "expect": f"choose:{card}", "enrol": True, "user": user})  # fmt: skip
        for card, word in enumerate(NUMBERS, 1):
            for k, (speed, pitch) in enumerate(ANSWERS):
                name = f"{user}-genuine-{word}-{k}"
                rows.append({"id": name, "audio": say(folder, name, word, voice, speed, pitch),
                             "expect": f"choose:{card}", "class": "genuine", "user": user,
                             **case})  # fmt: skip
        for word in OTHERS:
            name = f"{user}-other-{word.replace(' ', '_')}"
            rows.append({"id": name, "audio": say(folder, name, word, voice, 160, 50),
                         "expect": "refuse", "class": "sound_alike", "user": user,
                         **case})  # fmt: skip
    lines = [json.dumps(r) for r in rows]
    (folder / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    firsts = {r["user"]: r["id"] for r in reversed(rows) if r.get("enrol")}
    hard = [json.dumps({**r, "hard": True} if r["id"] in firsts.values() else r) for r in rows]
    (folder / "manifest-hard.jsonl").write_text("\n".join(hard) + "\n")
    plain = [json.dumps(r) for r in rows if not r.get("enrol")]
    (folder / "manifest-plain.jsonl").write_text("\n".join(plain) + "\n")
    print(f"{len(rows) - len(plain)} enrolment takes, {len(plain)} cases in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
