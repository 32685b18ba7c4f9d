"""Family-wise error control over Learn-then-Test's hypotheses (DESIGN §8c): fixed-sequence testing
within one family of thresholds, Bonferroni across families (Angelopoulos et al. 2021, §4: any
FWER-controlling procedure over the hypotheses H: R > α keeps the guarantee).
"""

from __future__ import annotations

from collections.abc import Sequence


def fixed_sequence(p_values: Sequence[float], delta: float) -> int:
    """How many leading hypotheses of an ordered sequence are rejected: reject while p_j ≤ δ, stop at
    the first that is not. The order is fixed before the p-values are seen, so P(any true hypothesis
    is rejected) ≤ δ without a correction for the number of tests."""
    rejected = 0
    for p in p_values:
        if p > delta:
            break
        rejected += 1
    return rejected


def bonferroni(delta: float, families: int) -> float:
    """The level of each of ``families`` tested families, so that the union of their errors is ≤ δ."""
    return delta / families
