"""The CI subset of the adversarial corpus through the real app and the real recogniser."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES, FSDD, require
from voicegate_lab.eval import local, runner
from voicegate_lab.eval.manifest import load
from voicegate_lab.eval.report import summary

CI_MANIFEST = FIXTURES / "corpus" / "manifest-ci.jsonl"


@pytest.mark.whisper
@pytest.mark.slow
@pytest.mark.corpus
async def test_the_ci_corpus_releases_nothing_it_should_not() -> None:
    require(FSDD.is_dir(), f"the FSDD corpus at {FSDD}")
    cases = load(CI_MANIFEST)
    assert len(cases) >= 100
    async with local.in_process(local.whisper_voice("base", ("en", "hi"))) as harness:
        results = await runner.evaluate(cases, harness, progress=False)
    doc = summary(results)
    false = [r for r in doc["results"] if r["false_release"]]
    assert doc["false_releases"] == 0, false
