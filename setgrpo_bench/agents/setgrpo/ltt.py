"""Learn-then-Test's hypotheses and p-values (Angelopoulos et al. 2021, §3; DESIGN §8c), apart from the
procedure that controls the family-wise error over them (``fixed_sequence``).

For a threshold τ, H(τ): R(τ) > α, where R(τ) = P(E = 1 | s ≥ τ) is the reversal rate of the groups the
gate accepts. On D2, k reversals among m accepted groups give the exact binomial p-value
p = BinomCDF(k; m, α) (a super-uniform p-value under H); no count of reversals can reject H when
m < ln δ / ln(1 − α).
"""

from __future__ import annotations

import math

from scipy.stats import binom

from ...errors import ConfigError


def binomial_p_value(k: int, m: int, alpha: float) -> float:
    """Exact p-value of H0: R > α after k reversals among m accepted groups: BinomCDF(k; m, α)
    (1 when m = 0). Integer counts only, never a rounded ratio."""
    if isinstance(k, float) or isinstance(m, float) or not 0 <= k <= m:
        raise ConfigError("(k, m)", (k, m), "integers with 0 <= k <= m")
    return 1.0 if m == 0 else float(binom.cdf(k, m, alpha))


def min_testable_count(alpha: float, delta: float) -> float:
    """m below which H0 cannot be rejected even with zero reversals: ln δ / ln(1 − α)."""
    return math.log(delta) / math.log(1 - alpha)
