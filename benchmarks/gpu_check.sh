#!/usr/bin/env bash
# GPU check: on a CUDA machine with torch + transformers (no internet needed), build a randomly
# initialised ~0.5B-parameter Qwen2-architecture model locally and run 3 SetGRPO steps on the built-in
# suite; print rollout and update tokens/s and peak GPU memory. vLLM is used when it is importable.
#   bash benchmarks/gpu_check.sh [OUT_DIR]
set -euo pipefail
out="${1:-${TMPDIR:-/tmp}/setgrpo_gpu_check}"
mkdir -p "$out"
python - "$out/qwen2-0.5b-random" <<'PY'
import sys, torch
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM
from setgrpo_bench.policy import build_tiny

target = sys.argv[1]
tokenizer = AutoTokenizer.from_pretrained(build_tiny())  # the suite's byte-level BPE: no hub download
config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=1024, intermediate_size=4864, num_hidden_layers=24,
                     num_attention_heads=16, num_key_value_heads=2, max_position_embeddings=2048,
                     tie_word_embeddings=True, bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                     pad_token_id=tokenizer.pad_token_id)
torch.manual_seed(0)
model = Qwen2ForCausalLM(config)
print(f"parameters: {sum(p.numel() for p in model.parameters()) / 1e9:.3f} B")
model.save_pretrained(target)
tokenizer.save_pretrained(target)
PY
engine=transformers
python -c "import vllm" 2>/dev/null && engine=vllm
echo "engine: $engine"
python -m setgrpo_bench run --agent setgrpo --policy "$out/qwen2-0.5b-random" --device cuda --engine "$engine" \
  --steps 3 --geometry last:2 --eval-instances 8 --out "$out/run" --overwrite
python - "$out/run/metrics.jsonl" "$out/run/timings.jsonl" <<'PY'
import json, sys
computed, measured = ([json.loads(line) for line in open(path)] for path in sys.argv[1:3])
rows = [{**c, **m} for c, m in zip(computed, measured)]  # a step's computed and measured fields
tokens = sum(r["response_tokens"] * 16 * 8 for r in rows)
rollout, update = sum(r["time_rollout_grade"] for r in rows), sum(r["time_update"] for r in rows)
print(f"rollout: {tokens / rollout:,.0f} response tokens/s (incl. grading); update: {tokens / update:,.0f} tokens/s")
print(f"SetGRPO geometry + calibration: {sum(r['time_coefficients'] for r in rows) / len(rows):.2f} s/step")
print(f"peak GPU memory: {max(r.get('gpu_peak_mem_gb', 0) for r in rows):.1f} GB")
PY
