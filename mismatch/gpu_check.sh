#!/usr/bin/env bash
# The whole mismatch probe and the roofline profile on one GPU, in one call of at most ~8 minutes
# (BUDGET_S=340 s for the probe, PROFILE_CAP=120 s for the profile; H200 estimate; untested on a GPU).
#
#   bash mismatch/gpu_check.sh                       # from any directory; writes under $OUT
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
# The script cds to the repository root (found from its own path): a relative OUT or PYTHON is taken
# from the directory it was started in, the default OUT (results/mismatch/gpu) from the root. Every
# command has a time limit and one step failing does not stop the others; each step's rc is logged,
# and the last line printed names the steps that failed (exit 1), or says none did (exit 0).
set -u
START_DIR=$(pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd) || { echo "gpu_check: cannot find the repository root" >&2; exit 2; }
# a relative path given by the caller is relative to where the script was started
from_start() { [[ "$1" == /* ]] && echo "$1" || echo "$START_DIR/$1"; }
OUT="${OUT:-$ROOT/results/mismatch/gpu}"
OUT=$(from_start "$OUT")
PY="${PYTHON:-python3}"
[[ "$PY" == */* ]] && PY=$(from_start "$PY")  # a bare name (python3, false) is looked up on PATH
DEVICE="${DEVICE:-cuda}"
SRC="${SRC:---random-0.6b}"
PROMPTS="${PROMPTS:-30}"
NEW="${NEW:-32}"
BUDGET_S="${BUDGET_S:-340}"
ONLY="${ONLY:-}"
PROFILE_MODEL="${PROFILE_MODEL:-qwen3-8b}"
PROFILE_GPU="${PROFILE_GPU:-h200}"
cd "$ROOT" || { echo "gpu_check: cannot cd to $ROOT" >&2; exit 2; }
mkdir -p "$OUT" || { echo "gpu_check: cannot make OUT=$OUT" >&2; exit 2; }
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
START=$(date +%s)
LOG="$OUT/log.txt"
: > "$LOG"
FAILED=()  # "name (rc=N)" of each step that failed or was skipped
# limited CMD...: CMD with a time limit of $LIMIT seconds (killed 10 s after its TERM), no stdin
limited() { timeout -k 10 "$LIMIT" "$@" < /dev/null; }
failed() { FAILED+=("$1"); }

{
  date -u
  echo "root $ROOT, out $OUT, python $PY, device $DEVICE"
  LIMIT=30 limited nvidia-smi 2>&1 | head -20
  LIMIT=60 limited "$PY" -c "import torch, transformers, sys; print('python', sys.version.split()[0], 'torch', torch.__version__,
'transformers', transformers.__version__, 'cuda', torch.cuda.is_available(), torch.version.cuda)"
} > "$OUT/env.txt" 2>&1
ENV_RC=$?
echo "== env: python, torch, transformers: rc=$ENV_RC (env.txt)" >> "$LOG"
(( ENV_RC == 0 )) || failed "env (rc=$ENV_RC)"

# step NAME CAP_SECONDS ARGS...: run one probe with the smaller of CAP and the time left.
step() {
  local name=$1 cap=$2 left t0 rc
  shift 2
  left=$(( BUDGET_S - ($(date +%s) - START) ))
  (( left < cap )) && cap=$left
  if (( cap < 20 )); then
    echo "== $name: skipped, ${left}s left" >> "$LOG"
    failed "$name (skipped: ${left}s of BUDGET_S left)"
    return 1
  fi
  local cmd=("$PY" -m mismatch "$@" --device "$DEVICE" --prompts "$PROMPTS" --new-tokens "$NEW"
    --json "$OUT/$name.json")
  echo "== $name (limit ${cap}s): ${cmd[*]}" >> "$LOG"
  t0=$(date +%s)
  LIMIT=$cap limited "${cmd[@]}" > "$OUT/$name.txt" 2>> "$LOG"
  rc=$?
  echo "== $name: rc=$rc in $(( $(date +%s) - t0 ))s" >> "$LOG"
  (( rc == 0 )) || failed "$name (rc=$rc)"
  return $rc
}

# profile: the roofline's kernels measured on this device (docs/decode.md), at most PROFILE_CAP seconds
profile() {
  local cap="${PROFILE_CAP:-120}" t0 rc model="$PROFILE_MODEL" extra=()
  if [[ "$DEVICE" == cpu ]]; then  # the CPU smoke run profiles the tiny model's shapes, not $PROFILE_MODEL
    model=tiny
    extra=(--dtype float32 --tokens 1,16 --tp 1,2 --decode 2x32 --prefill 8x0,8x8 --warmup 1 --repeats 3)
  fi
  local cmd=("$PY" pipesim/compute/profile.py --model "$model" --device "$DEVICE" "${extra[@]}"
    --out "$OUT/profile.csv")
  echo "== profile (limit ${cap}s): $model on $DEVICE: ${cmd[*]}" >> "$LOG"
  t0=$(date +%s)
  LIMIT=$cap limited "${cmd[@]}" > "$OUT/profile.txt" 2>> "$LOG"
  rc=$?
  echo "== profile: rc=$rc in $(( $(date +%s) - t0 ))s" >> "$LOG"
  if (( rc != 0 )); then
    failed "profile (rc=$rc)"
    return $rc
  fi
  if LIMIT=30 limited "$PY" -c "import pipesim" 2> /dev/null; then
    LIMIT=60 limited "$PY" -m pipesim check-roofline "$OUT/profile.csv" --gpu "$PROFILE_GPU" >> "$OUT/profile.txt" 2>&1
    rc=$?
    echo "== check-roofline --gpu $PROFILE_GPU: rc=$rc" >> "$LOG"
    (( rc == 0 )) || failed "check-roofline (rc=$rc)"
  else  # torch alone (no simpy): say so in one line, not with an ImportError's traceback
    echo "check-roofline: pipesim does not import here; run: pipesim check-roofline profile.csv --gpu $PROFILE_GPU" >> "$OUT/profile.txt"
  fi
  return $rc
}

# the last line: which steps failed (exit 1), or that none did (exit 0)
finish() {
  echo "== total $(( $(date +%s) - START ))s" >> "$LOG"
  cat "$@" "$LOG" 2>/dev/null | tail -80
  local line
  if (( ${#FAILED[@]} )); then
    line="gpu_check: FAILED steps: $(IFS=,; echo "${FAILED[*]}" | sed 's/,/, /g') (details in $LOG)"
  else
    line="gpu_check: every step passed (outputs in $OUT)"
  fi
  echo "$line" >> "$LOG"
  echo "$line"
  (( ${#FAILED[@]} == 0 ))
  exit $?
}

if [[ "$ONLY" == profile ]]; then
  profile
  finish "$OUT/profile.txt"
fi

step random06b 170 $SRC

REAL="${QWEN3_PATH:-}"
if [[ -z "$REAL" ]]; then
  HUB="${HF_HUB_CACHE:-${HF_HOME:-$HOME/.cache/huggingface}/hub}"
  for d in "$HUB"/models--Qwen--Qwen3-0.6B/snapshots/*/; do [[ -f "$d/config.json" ]] && REAL="$d" && break; done
fi
if [[ -n "$REAL" ]]; then
  step real06b 130 --model "$(from_start "$REAL")"
else
  echo "== real06b: skipped, no local Qwen3-0.6B (set QWEN3_PATH or fill the HF cache)" >> "$LOG"
fi

if step rerun 100 $SRC --no-knobs; then
  timeout -k 10 60 "$PY" - "$OUT/random06b.json" "$OUT/rerun.json" >> "$LOG" 2>&1 <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
same = a["samples"] == b["samples"] and a["comparisons"] == b["comparisons"]
print("determinism: rerun in a fresh process reproduced every sample and row:", same)
PYEOF
  rc=$?
  echo "== determinism: rc=$rc" >> "$LOG"
  (( rc == 0 )) || failed "determinism (rc=$rc)"
fi
profile
finish "$OUT/random06b.txt" "$OUT/profile.txt"
