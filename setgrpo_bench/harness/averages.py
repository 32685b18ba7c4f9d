"""Per-domain and macro averages of per-benchmark scores (DESIGN §9), without torch: publishing checks
an evaluation's averages against its per-benchmark scores with the same function."""

from __future__ import annotations

from typing import Any

import numpy as np


def aggregate(per_env: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Domain means (mean over the domain's benchmarks) and macro averages (unweighted mean over
    benchmarks), with the standard error of a mean of independent means: SE = √(Σ se_k²) / K."""
    domains: dict[str, list[str]] = {}
    for name, row in per_env.items():
        domains.setdefault(row["domain"], []).append(name)
    out: dict[str, Any] = {"domains": {}}
    for key in ("true_score", "judge_score"):
        for domain, names in sorted(domains.items()):
            entry = out["domains"].setdefault(domain, {"benchmarks": sorted(names)})
            entry[key] = float(np.mean([per_env[n][key] for n in names]))
            entry[f"{key}_se"] = float(np.sqrt(sum(per_env[n][f"{key}_se"] ** 2 for n in names)) / len(names))
        out[f"macro_{key}"] = float(np.mean([row[key] for row in per_env.values()]))
        out[f"macro_{key}_se"] = float(np.sqrt(sum(r[f"{key}_se"] ** 2 for r in per_env.values())) / len(per_env))
        out[f"domain_macro_{key}"] = float(np.mean([d[key] for d in out["domains"].values()]))
    return out
