"""What the similarity monitor and the reports' similarity matrix cost as a run grows.

The monitor scores every cycle's reflection against every earlier one (after each
cycle), and a report's heatmap scores every pair, so both grow with the run: this
prints, at 10, 50, 200 and 500 cycles, the monitor's time for one cycle and the time of
the whole matrix, for `contreact.nodes.similarity` and `contreact.analysis.similarity`
(numpy arrays over one n-gram vocabulary) and for the sparse-dict reference it must agree
with (`tfidf_vectors` + `sparse_cosine`, Python loops: how the monitor computed its scores
before).

Reflections: every note joins four texts of the labelled calibration set
(`tests/data/similarity_pairs.yaml`, first-person notes in the register of the paper's
agents), picked by the cycle number, ~600 characters, as long as a typical reflection of
the models the paper ran. The monitor's time is measured as in a run: the earlier notes'
n-grams were counted in earlier cycles (a warm process), the new note's are counted now.
Run: `.venv/bin/python benchmarks/cost/similarity_speed.py [--quick]`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The shared helpers (common.py, ...) are in benchmarks/, the folder above this one.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml
from common import Figure, parser, print_table, report

from contreact.analysis.similarity import lexical_matrix, sparse_cosine, tfidf_vectors
from contreact.text.similarity import _grams, char_ngrams, lexical_scores

PAIRS = Path(__file__).resolve().parents[2] / "tests" / "data" / "similarity_pairs.yaml"


def notes(n: int) -> list[str]:
    """`n` reflections of ~600 characters built from the calibration texts."""
    pairs = yaml.safe_load(PAIRS.read_text(encoding="utf-8"))["pairs"]
    texts = [p[k] for p in pairs for k in ("a", "b")]
    m = len(texts)
    return [
        " ".join(
            texts[(step * c + offset) % m] for step, offset in ((1, 0), (3, 1), (7, 2), (11, 3))
        )
        for c in range(1, n + 1)
    ]


def best_of(runs: int, fn: Callable[[], Any]) -> float:
    """The fastest of `runs` calls, in seconds."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def reference_scores(reflection: str, earlier: list[str]) -> list[float]:
    """The monitor's scores the sparse-dict way (idf over the reflection and the earlier).

    As the monitor did: earlier notes' n-grams cached, the new note's counted.
    """
    char_ngrams(reflection)
    vectors = tfidf_vectors([reflection, *earlier])
    return [sparse_cosine(vectors[0], v) for v in vectors[1:]]


def reference_matrix(texts: list[str]) -> list[list[float]]:
    """The report's matrix the sparse-dict way."""
    vectors = tfidf_vectors(texts)
    return [[sparse_cosine(a, b) for b in vectors] for a in vectors]


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    sizes = (10, 50) if args.quick else (10, 50, 200, 500)
    all_notes = notes(max(sizes))
    rows = []
    figures = []
    for n in sizes:
        before, reflection = all_notes[: n - 1], all_notes[n - 1]
        earlier = list(enumerate(before, start=1))
        lexical_scores(before[-1], earlier[:-1])  # the earlier cycles, counted as in a run

        def monitor(earlier: list[tuple[int, str]] = earlier, reflection: str = reflection) -> None:
            _grams._texts.pop(reflection, None)  # this cycle's note is new to the process
            lexical_scores(reflection, earlier)

        def reference(before: list[str] = before, reflection: str = reflection) -> None:
            reference_scores(reflection, before)

        texts = all_notes[:n]
        ours = best_of(5, monitor)
        counting = best_of(5, lambda reflection=reflection: char_ngrams(reflection))
        ref = best_of(1 if n > 50 else 3, reference)
        matrix = best_of(3, lambda texts=texts: lexical_matrix(texts))
        ref_matrix = (
            best_of(1, lambda texts=texts: reference_matrix(texts)) if n <= 200 else float("nan")
        )
        rows.append([n, ours * 1000, counting * 1000, ref * 1000, matrix, ref_matrix])
        figures.append(
            Figure(f"sim-{n}", f"monitor, one cycle at cycle {n}", ours * 1000, "ms", None)
        )
        figures.append(Figure(f"matrix-{n}", f"report matrix, {n} cycles", matrix, "s", None))
    print_table(
        [
            "cycle",
            "monitor ms/cycle",
            "of which counting the note",
            "reference ms/cycle",
            "report matrix s",
            "reference matrix s",
        ],
        rows,
        title="Similarity cost as a run grows (~600-character reflections; best of runs; "
        "reference matrix skipped past 200 cycles)",
    )
    report(figures, args.json)


if __name__ == "__main__":
    main()
