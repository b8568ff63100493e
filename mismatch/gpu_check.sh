#!/usr/bin/env bash
# The whole mismatch probe and the roofline profile on one GPU, in one call of at most ~8 minutes
# (BUDGET_S=340 s for the probe, PROFILE_CAP=120 s for the profile; H200 estimate; untested on a GPU).
#
#   bash mismatch/gpu_check.sh                       # from the repo root; writes under $OUT
#   PYTHON=.venv/bin/python SRC=--tiny DEVICE=cpu PROMPTS=4 NEW=4 OUT=/tmp/m bash mismatch/gpu_check.sh  # CPU smoke
#
# Runs (each a fresh `python3 -m mismatch` process, bf16 + fp32, batch 1 and batch N=PROMPTS, every knob):
#   1. random06b : Qwen3-0.6B configuration, RANDOM weights (labelled as such in every output)
#   2. real06b   : the real Qwen3-0.6B, only if a local copy exists ($QWEN3_PATH or the HF cache)
#   3. rerun     : step 1 again without knobs, in a new process, to check run-to-run determinism
#   4. profile   : `python pipesim/compute/profile.py` (torch alone; docs/decode.md) measures this GPU's
#                  GEMMs, SDPA attention and all-reduce for $PROFILE_MODEL into profile.csv, then the
#                  roofline's error on it where pipesim imports (else: pipesim check-roofline profile.csv
#                  --gpu $PROFILE_GPU on a machine that has it). DEVICE=cpu profiles tiny shapes.
# Files under $OUT (flat): env.txt log.txt random06b.{txt,json} real06b.{txt,json} rerun.{txt,json}
# profile.{csv,txt}. ONLY=profile runs step 4 alone (its CPU check: ONLY=profile DEVICE=cpu ...).
# Needs only torch + transformers (no pip install); the package runs from the working tree.
set -u
OUT="${OUT:-./results/mismatch/gpu}"
PY="${PYTHON:-python3}"
DEVICE="${DEVICE:-cuda}"
SRC="${SRC:---random-0.6b}"
PROMPTS="${PROMPTS:-30}"
NEW="${NEW:-32}"
BUDGET_S="${BUDGET_S:-340}"
ONLY="${ONLY:-}"
PROFILE_MODEL="${PROFILE_MODEL:-qwen3-8b}"
PROFILE_GPU="${PROFILE_GPU:-h200}"
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

# profile: the roofline's kernels measured on this device (docs/decode.md), at most PROFILE_CAP seconds
profile() {
  local cap="${PROFILE_CAP:-120}" t0 rc extra=()
  [[ "$DEVICE" == cpu ]] && extra=(--model tiny --dtype float32 --tokens 1,16 --tp 1,2 --decode 2x32
    --prefill 8x0,8x8 --warmup 1 --repeats 3)
  echo "== profile (limit ${cap}s): $PROFILE_MODEL on $DEVICE" >> "$LOG"
  t0=$(date +%s)
  timeout "$cap" "$PY" pipesim/compute/profile.py --model "$PROFILE_MODEL" --device "$DEVICE" "${extra[@]}" \
    --out "$OUT/profile.csv" > "$OUT/profile.txt" 2>> "$LOG"
  rc=$?
  echo "== profile: rc=$rc in $(( $(date +%s) - t0 ))s" >> "$LOG"
  if (( rc == 0 )); then
    if "$PY" -c "import pipesim" 2> /dev/null; then
      "$PY" -m pipesim check-roofline "$OUT/profile.csv" --gpu "$PROFILE_GPU" >> "$OUT/profile.txt" 2>&1
    else  # torch alone (no simpy): say so in one line, not with an ImportError's traceback
      echo "check-roofline: pipesim does not import here; run: pipesim check-roofline profile.csv --gpu $PROFILE_GPU" >> "$OUT/profile.txt"
    fi
  fi
  return $rc
}

if [[ "$ONLY" == profile ]]; then
  profile
  echo "== total $(( $(date +%s) - START ))s" >> "$LOG"
  cat "$OUT/profile.txt" "$LOG" 2>/dev/null | tail -40
  exit 0
fi

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
profile
echo "== total $(( $(date +%s) - START ))s" >> "$LOG"
cat "$OUT/random06b.txt" "$OUT/profile.txt" "$OUT/log.txt" 2>/dev/null | tail -80
