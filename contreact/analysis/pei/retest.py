"""Test-retest: does an evaluator give a history the same level when asked again?

An LLM judge is an instrument, and an instrument that answers differently each time it is
asked measures little. `pei --repeat K` asks each evaluator the same question K times,
under seeds `pei.seed`, `pei.seed + 1`, ... (the sampling temperature is the run's
`pei.temperature`: at 0 a model may well answer alike whatever the seed). Per evaluator,
its ratings form a histories x repeats matrix, and the agreement statistics of
`analysis.agreement` over that matrix are its self-consistency: ICC(A,1) with its interval
(the primary figure) and Krippendorff's alpha. Stale ratings (made before their run's last
cycle) are left out, as everywhere else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from contreact.analysis.agreement import Agreement, describe, icc_a1, krippendorff_alpha
from contreact.analysis.pei.results import PeiResult


@dataclass(frozen=True)
class Retest:
    """One evaluator's consistency over its repeated ratings of the same histories."""

    evaluator: str
    repeats: int
    """The most repeats any history got."""
    histories: int
    icc: Agreement
    alpha: Agreement

    def sentence(self) -> str:
        """One line for `pei` and the report."""
        icc = describe(self.icc, "histories", "repeats")
        alpha = describe(self.alpha, "histories", "repeats")
        return f"{self.evaluator}, asked {self.repeats} times: test-retest {icc}; {alpha}"


def self_consistency(
    results: Sequence[PeiResult], last_cycles: Mapping[str, int] | None = None
) -> list[Retest]:
    """The test-retest figure of every evaluator asked more than once about a history.

    Args:
        results: Stored ratings of every repeat (`stored_results(..., repeats=True)`).
        last_cycles: Each run's last cycle; ratings made before it are stale and left out.
    """
    last = dict(last_cycles or {})
    by_evaluator: dict[str, dict[str, dict[int, float | None]]] = {}
    for r in results:
        if r.is_stale(last.get(r.run_id, r.at_cycle)):
            continue
        level = None if r.level is None else float(r.level)
        by_evaluator.setdefault(r.evaluator, {}).setdefault(r.run_id, {})[r.repeat] = level
    found = []
    for evaluator, histories in by_evaluator.items():
        repeats = sorted({k for asked in histories.values() for k in asked})
        if len(repeats) < 2:
            continue
        matrix = [[asked.get(k) for k in repeats] for _, asked in sorted(histories.items())]
        found.append(
            Retest(
                evaluator=evaluator,
                repeats=len(repeats),
                histories=len(histories),
                icc=icc_a1(matrix),
                alpha=krippendorff_alpha(matrix),
            )
        )
    return found
