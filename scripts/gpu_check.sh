#!/usr/bin/env bash
# GPU check: the digit recipe full / LoRA / QLoRA in bf16 on one CUDA GPU, a few steps each, one after
# another; prints step time and peak GPU memory (torch's max allocated and reserved) per run, next to
# `grpo-ext plan`'s estimate and their ratio, and records them in memory.json per run (calibrates the plan).
#   GPU_CHECK_RECIPES="digit recipes/gsm8k/qwen2.5-1.5b-qlora.yaml" picks other recipes (names or paths).
# Under 8 minutes on one GPU (each run is capped at 150 s; the model is converted once, ~30 s, if not cached).
#   bash scripts/gpu_check.sh [STEPS]          STEPS defaults to 5
#   GPU_CHECK_DEVICE=cpu GPU_CHECK_TIMEOUT=600 bash scripts/gpu_check.sh 1   the same on a CPU (float32, peak RSS)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
STEPS=${1:-5}
DEVICE=${GPU_CHECK_DEVICE:-cuda}
LIMIT=${GPU_CHECK_TIMEOUT:-150}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
"$PY" - <<'PY'
import importlib.metadata as md, torch
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
print(f"gpu_check: {gpu}; torch {torch.__version__}, trl {md.version('trl')}, peft {md.version('peft')}, bitsandbytes {md.version('bitsandbytes')}")
PY
"$PY" -c "from grpo_ext.run import model_cache; from grpo_ext.settings import model_names; model_cache.materialize(model_names.resolve('smollm2-135m-instruct', __import__('pathlib').Path('.')), log=lambda _: None)"
status=0
for recipe in ${GPU_CHECK_RECIPES:-digit digit-lora digit-qlora}; do
  name=$(basename "$recipe" .yaml)
  [ -f "$recipe" ] || recipe="recipes/$recipe.yaml"
  if ! timeout "$LIMIT" "$PY" scripts/gpu_check.py "$recipe" --steps "$STEPS" --device "$DEVICE" --out "$OUT/$name" >"$OUT/$name.log" 2>&1; then
    echo "$name: FAILED; last lines of $OUT/$name.log:"
    tail -n 5 "$OUT/$name.log"
    status=1
  else
    tail -n 1 "$OUT/$name.log"
  fi
done
echo "gpu_check: run directories, logs and memory.json (measured peaks, plan rows, ratio) in $OUT"
exit $status
