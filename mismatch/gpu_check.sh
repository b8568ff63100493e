#!/usr/bin/env bash
# The whole mismatch probe on one GPU, in one call of at most ~6 minutes (H200 estimate; untested on a GPU).
#
#   bash mismatch/gpu_check.sh                       # from the repo root; writes under $OUT
#   PYTHON=.venv/bin/python SRC=--tiny DEVICE=cpu PROMPTS=4 NEW=4 OUT=/tmp/m bash mismatch/gpu_check.sh  # CPU smoke
#
# Runs (each a fresh `python3 -m mismatch` process, bf16 + fp32, batch 1 and batch N=PROMPTS, every knob):
#   1. random06b : Qwen3-0.6B configuration, RANDOM weights (labelled as such in every output)
#   2. real06b   : the real Qwen3-0.6B, only if a local copy exists ($QWEN3_PATH or the HF cache)
#   3. rerun     : step 1 again without knobs, in a new process, to check run-to-run determinism
# Files under $OUT (flat, at most 8): env.txt log.txt random06b.{txt,json} real06b.{txt,json} rerun.{txt,json}
# Needs only torch + transformers (no pip install); the package runs from the working tree.
set -u
OUT="${OUT:-./results/mismatch/gpu}"
PY="${PYTHON:-python3}"
DEVICE="${DEVICE:-cuda}"
SRC="${SRC:---random-0.6b}"
PROMPTS="${PROMPTS:-30}"
NEW="${NEW:-32}"
BUDGET_S="${BUDGET_S:-340}"
mkdir -p "$OUT"
export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
START=$(date +%s)
LOG="$OUT/log.txt"
: > "$LOG"

{
  date -u
  nvidia-smi 2>&1 | head -20
  "$PY" -c "import torch, transformers, sys; print('python', sys.version.split()[0], 'torch', torch.__version__,
'transformers', transformers.__version__, 'cuda', torch.cuda.is_available(), torch.version.cuda)"
} > "$OUT/env.txt" 2>&1

# step NAME CAP_SECONDS ARGS...: run one probe with the smaller of CAP and the time left.
step() {
  local name=$1 cap=$2 left t0 rc
  shift 2
  left=$(( BUDGET_S - ($(date +%s) - START) ))
  (( left < cap )) && cap=$left
  if (( cap < 20 )); then echo "== $name: skipped, ${left}s left" >> "$LOG"; return 1; fi
  echo "== $name (limit ${cap}s): $*" >> "$LOG"
  t0=$(date +%s)
  timeout "$cap" "$PY" -m mismatch "$@" --device "$DEVICE" --prompts "$PROMPTS" --new-tokens "$NEW" \
    --json "$OUT/$name.json" > "$OUT/$name.txt" 2>> "$LOG"
  rc=$?
  echo "== $name: rc=$rc in $(( $(date +%s) - t0 ))s" >> "$LOG"
  return $rc
}

step random06b 170 $SRC

REAL="${QWEN3_PATH:-}"
if [[ -z "$REAL" ]]; then
  HUB="${HF_HUB_CACHE:-${HF_HOME:-$HOME/.cache/huggingface}/hub}"
  for d in "$HUB"/models--Qwen--Qwen3-0.6B/snapshots/*/; do [[ -f "$d/config.json" ]] && REAL="$d" && break; done
fi
if [[ -n "$REAL" ]]; then
  step real06b 130 --model "$REAL"
else
  echo "== real06b: skipped, no local Qwen3-0.6B (set QWEN3_PATH or fill the HF cache)" >> "$LOG"
fi

if step rerun 100 $SRC --no-knobs; then
  "$PY" - "$OUT/random06b.json" "$OUT/rerun.json" >> "$LOG" 2>&1 <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
same = a["samples"] == b["samples"] and a["comparisons"] == b["comparisons"]
print("determinism: rerun in a fresh process reproduced every sample and row:", same)
PYEOF
fi
echo "== total $(( $(date +%s) - START ))s" >> "$LOG"
cat "$OUT/random06b.txt" "$OUT/log.txt" 2>/dev/null | tail -80
