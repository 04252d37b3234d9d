"""Benchmarks, one module per figure: ``core``, ``p1`` … ``p6``; run by ``voicegate bench``.

Each module has ``run(options) -> dict`` returning its figures (JSON-ready) and ``lines(figures)``
for the human summary; every ratio is measured in the same run, as the median of several
repetitions after a warm-up. Speed is measured here and never asserted in tests.
``suite.BENCHMARKS`` names them all; ``suite.run`` runs several in order.
"""
