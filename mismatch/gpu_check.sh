#!/usr/bin/env bash
# The whole mismatch probe and the roofline profile on one GPU, in one command of at most
# TOTAL_S=535 s (the lent machine stops a command at 600 s). Budgeted for one H100; untested on a GPU.
#
#   bash mismatch/gpu_check.sh                       # from any directory; writes under $OUT
#   PYTHON=.venv/bin/python SRC=--tiny DEVICE=cpu PROMPTS=4 NEW=4 OUT=/tmp/m bash mismatch/gpu_check.sh  # CPU smoke
#
# Steps, in this order; each is one command with its own time limit (seconds): at the limit it gets
# SIGINT (`timeout -s INT`), so a probe writes its result so far (JSON marked "incomplete") and the
# profile its rows so far (complete=0), and SIGKILL GRACE seconds later. Every limit plus its grace,
# summed, is 530 s; the last step only runs in what is left of TOTAL_S.
#      step         limit  grace  what
#   0. env          15+45    5+5  nvidia-smi; python, torch, transformers versions and CUDA
#   1. random06b      130     10  Qwen3-0.6B configuration, RANDOM weights (labelled so everywhere)
#   2. rerun          120     10  random06b again without knobs in a new process (determinism)
#   3. determinism     20      5  rerun's samples and rows against random06b's
#   4. profile         90     10  `python pipesim/compute/profile.py` (torch alone; docs/decode.md):
#                                 this GPU's GEMMs and SDPA attention for $PROFILE_MODEL into
#                                 profile.csv (DEVICE=cpu profiles tiny shapes)
#   5. roofline     15+40    5+5  where pipesim imports: `pipesim check-roofline profile.csv`, the
#                                 GPU read from the CSV's device column (PROFILE_GPU=name chooses
#                                 it); else a one-line hint to run it elsewhere
#   6. real06b  time left (60 to 130), 10: the real Qwen3-0.6B, only if a local copy exists
#                                 ($QWEN3_PATH or the HF cache; nothing is downloaded)
# Each probe is `python3 -m mismatch`: bf16 + fp32, batch 1 and batch N=PROMPTS, every knob.
# Files under $OUT (flat, at most 7; the lent machine brings back 8): log.txt (versions, each
# command, its stderr, rc and seconds, the step table), tables.txt (every probe's tables),
# random06b.json rerun.json [real06b.json] profile.csv profile.txt. Earlier runs' files of these
# names, and temporary files a killed write left, are removed. ONLY=profile runs env and the
# profile alone (its CPU check: ONLY=profile DEVICE=cpu ...). CAP_<STEP>=seconds (CAP_RERUN=150;
# PROFILE_CAP for the profile) changes one step's limit; a step is still cut to end by TOTAL_S.
# Needs only torch + transformers (no pip install); the package runs from the working tree.
# The script cds to the repository root (found from its own path): a relative OUT or PYTHON is taken
# from the directory it was started in, the default OUT (results/mismatch/gpu) from the root. One
# step failing does not stop the others; the last line printed names the steps that failed or were
# stopped at their limit (exit 1), or says none did (exit 0).
set -u
START_DIR=$(pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd) || { echo "gpu_check: cannot find the repository root" >&2; exit 2; }
# a relative path given by the caller is relative to where the script was started
from_start() { [[ "$1" == /* ]] && echo "$1" || echo "$START_DIR/$1"; }
if [[ -z "${OUT:-}" ]]; then  # a device machine's $OUT that is not exported reads as unset here
  echo "gpu_check: OUT is not set (run it as OUT=\"\$OUT\" bash mismatch/gpu_check.sh): writing to $ROOT/results/mismatch/gpu" >&2
fi
OUT="${OUT:-$ROOT/results/mismatch/gpu}"
OUT=$(from_start "$OUT")
PY="${PYTHON:-python3}"
[[ "$PY" == */* ]] && PY=$(from_start "$PY")  # a bare name (python3, false) is looked up on PATH
DEVICE="${DEVICE:-cuda}"
SRC="${SRC:---random-0.6b}"
PROMPTS="${PROMPTS:-30}"
NEW="${NEW:-32}"
TOTAL_S="${TOTAL_S:-535}"
ONLY="${ONLY:-}"
PROFILE_MODEL="${PROFILE_MODEL:-qwen3-8b}"
PROFILE_GPU="${PROFILE_GPU:-}"  # empty: check-roofline reads the GPU from profile.csv's device column
for var in TOTAL_S PROMPTS NEW; do
  [[ "${!var}" =~ ^[0-9]+$ ]] || { echo "gpu_check: $var must be a whole number, got '${!var}'" >&2; exit 2; }
done

# The steps in order, each one's limit and the grace before SIGKILL (seconds). The limits plus
# graces sum to 530 <= TOTAL_S; real06b, last, gets what is left.
ORDER=(smi env random06b rerun determinism profile import roofline)
declare -A CAP=([smi]=15 [env]=45 [random06b]=130 [rerun]=120 [determinism]=20
  [profile]="${PROFILE_CAP:-90}" [import]=15 [roofline]=40 [real06b]=130)
declare -A GRACE=([smi]=5 [env]=5 [random06b]=10 [rerun]=10 [determinism]=5 [profile]=10
  [import]=5 [roofline]=5 [real06b]=10)
for s in "${!CAP[@]}"; do  # CAP_RERUN=150 ...: another limit for one step (TOTAL_S still holds)
  var="CAP_${s^^}"
  if [[ -n "${!var:-}" ]]; then
    [[ "${!var}" =~ ^[0-9]+$ ]] || { echo "gpu_check: $var must be a whole number, got '${!var}'" >&2; exit 2; }
    CAP[$s]=${!var}
  fi
done
[[ "${CAP[profile]}" =~ ^[0-9]+$ ]] || { echo "gpu_check: PROFILE_CAP must be a whole number" >&2; exit 2; }
OUTPUTS=(log.txt tables.txt random06b.json rerun.json real06b.json profile.csv profile.txt)

cd "$ROOT" || { echo "gpu_check: cannot cd to $ROOT" >&2; exit 2; }
mkdir -p "$OUT" || { echo "gpu_check: cannot make OUT=$OUT" >&2; exit 2; }
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
START=$(date +%s)
LOG="$OUT/log.txt"
TABLES="$OUT/tables.txt"
# temporary files a killed write leaves: the probe's .NAME.json.*.tmp, the profile's profile.csv.part
clean_tmp() { rm -f "$OUT"/.*.tmp "$OUT"/*.part; }
for f in "${OUTPUTS[@]}" env.txt random06b.txt rerun.txt real06b.txt; do rm -f "${OUT:?}/$f"; done
clean_tmp
: > "$LOG"
: > "$TABLES"
FAILED=()  # "name (why)" of each step that failed, was stopped at its limit, or was skipped
SUMMARY=()  # "name start limit grace elapsed rc" of each step (seconds; start from the script's)
failed() { FAILED+=("$1"); }

# limit_for NAME: NAME's limit, cut so that NAME and every step after it in ORDER, each at its own
# limit and grace, still end by TOTAL_S (it is NAME's own cap unless the caps were raised)
limit_for() {
  local name=$1 after=0 seen=0 s left
  for s in "${ORDER[@]}"; do
    (( seen )) && after=$(( after + CAP[$s] + GRACE[$s] ))
    [[ "$s" == "$name" ]] && seen=1
  done
  left=$(( TOTAL_S - ($(date +%s) - START) - GRACE[$name] - after ))
  echo $(( left < CAP[$name] ? left : CAP[$name] ))
}

# limited NAME MIN CMD...: CMD under NAME's limit (SIGINT at the limit, SIGKILL GRACE s later), no
# stdin; skipped (rc 200) when TOTAL_S leaves it under MIN seconds. Records the seconds it took.
limited() {
  local name=$1 least=$2 limit t0 rc
  shift 2
  limit=$(limit_for "$name")
  if (( limit < 1 || (limit < least && limit < CAP[$name]) )); then  # TOTAL_S cut it (not a CAP_ given)
    echo "== $name: skipped, TOTAL_S=$TOTAL_S leaves it ${limit}s (it needs ${least}s)" >> "$LOG"
    SUMMARY+=("$name $(( $(date +%s) - START )) 0 0 0 skipped")
    LAST_S=0
    return 200
  fi
  t0=$(date +%s)
  timeout -s INT -k "${GRACE[$name]}" "$limit" "$@" < /dev/null
  rc=$?
  clean_tmp
  LAST_S=$(( $(date +%s) - t0 ))
  SUMMARY+=("$name $(( t0 - START )) $limit ${GRACE[$name]} $LAST_S $rc")
  return $rc
}

# why RC: a step's failure as the last line names it
why() {
  case $1 in
    124) echo "rc=124: stopped at its limit" ;;
    200) echo "skipped: no time left" ;;
    137) echo "rc=137: killed" ;;
    *) echo "rc=$1" ;;
  esac
}

{
  date -u
  echo "root $ROOT, out $OUT, python $PY, device $DEVICE, TOTAL_S $TOTAL_S"
} >> "$LOG"
limited smi 5 nvidia-smi >> "$LOG" 2>&1
rc=$?
echo "== nvidia-smi: rc=$rc" >> "$LOG"
limited env 5 "$PY" -c "import torch, transformers, sys; print('python', sys.version.split()[0], 'torch', torch.__version__,
'transformers', transformers.__version__, 'cuda', torch.cuda.is_available(), torch.version.cuda)" >> "$LOG" 2>&1
rc=$?
echo "== env: python, torch, transformers: rc=$rc in ${LAST_S:-0}s" >> "$LOG"
(( rc == 0 )) || failed "env ($(why $rc))"

# probe NAME LEAST ARGS...: one `python -m mismatch` run; its tables go to tables.txt, its JSON to
# NAME.json (the result so far, marked incomplete, if it is stopped at its limit)
probe() {
  local name=$1 least=$2 rc
  shift 2
  local cmd=("$PY" -m mismatch "$@" --device "$DEVICE" --prompts "$PROMPTS" --new-tokens "$NEW"
    --json "$OUT/$name.json")
  echo "== $name (limit $(limit_for "$name")s): ${cmd[*]}" >> "$LOG"
  echo "##### $name: ${cmd[*]}" >> "$TABLES"
  limited "$name" "$least" "${cmd[@]}" >> "$TABLES" 2>> "$LOG"
  rc=$?
  (( rc == 200 )) || echo "== $name: rc=$rc in ${LAST_S}s" >> "$LOG"
  if (( rc == 200 )) && [[ "$name" == real06b ]]; then  # the optional last step: said in the log only
    return $rc
  elif (( rc != 0 )); then
    local kept=""
    [[ -s "$OUT/$name.json" ]] && kept="; $name.json keeps the result so far"
    failed "$name ($(why $rc)$kept)"
  fi
  return $rc
}

# determinism A.json B.json: whether the rerun reproduced random06b's samples and main rows
read -r -d '' DETERMINISM <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
same = a["samples"] == b["samples"] and a["comparisons"] == b["comparisons"]
cut = [p for p, r in zip(sys.argv[1:3], (a, b)) if "incomplete" in r]
note = f" ({', '.join(cut)} stopped part-way; their main rows are whole)" if cut else ""
print(f"determinism: rerun in a fresh process reproduced every sample and row: {same}{note}")
sys.exit(0 if same else 1)  # a rerun that differs fails the step: the last line must not say "passed"
PYEOF

# profile: the roofline's kernels measured on this device (docs/decode.md), then the roofline's
# error on them where pipesim imports
profile() {
  local rc model="$PROFILE_MODEL" extra=() gpu=()
  if [[ "$DEVICE" == cpu ]]; then  # the CPU smoke run profiles the tiny model's shapes, not $PROFILE_MODEL
    model=tiny
    extra=(--dtype float32 --tokens 1,16 --tp 1,2 --decode 2x32 --prefill 8x0,8x8 --warmup 1 --repeats 3)
  fi
  local cmd=("$PY" pipesim/compute/profile.py --model "$model" --device "$DEVICE" "${extra[@]}"
    --out "$OUT/profile.csv")
  echo "== profile (limit $(limit_for profile)s): $model on $DEVICE: ${cmd[*]}" >> "$LOG"
  limited profile 10 "${cmd[@]}" > "$OUT/profile.txt" 2>> "$LOG"
  rc=$?
  echo "== profile: rc=$rc in ${LAST_S:-0}s" >> "$LOG"
  if (( rc != 0 )); then
    local kept=""
    [[ -s "$OUT/profile.csv" ]] && kept="; profile.csv keeps the rows measured"
    failed "profile ($(why $rc)$kept)"
    [[ -s "$OUT/profile.csv" ]] || return $rc
  fi
  if [[ -n "$PROFILE_GPU" ]]; then
    gpu=(--gpu "$PROFILE_GPU")
  elif [[ "$DEVICE" == cpu ]]; then  # CPU times against a GPU's roofline: only the plumbing is checked
    gpu=(--gpu h100-sxm)
  fi
  if limited import 5 "$PY" -c "import pipesim" 2> /dev/null; then
    limited roofline 5 "$PY" -m pipesim check-roofline "$OUT/profile.csv" "${gpu[@]}" >> "$OUT/profile.txt" 2>&1
    rc=$?
    echo "== check-roofline ${gpu[*]:-(GPU from the CSV)}: rc=$rc in ${LAST_S:-0}s" >> "$LOG"
    (( rc == 0 )) || failed "check-roofline ($(why $rc))"
  else  # torch alone (no simpy): say so in one line, not with an ImportError's traceback
    echo "check-roofline: pipesim does not import here; where it does, run:" \
      "pipesim check-roofline profile.csv${gpu[*]:+ ${gpu[*]}} (the GPU is read from its device column)" \
      >> "$OUT/profile.txt"
  fi
  return $rc
}

# the step table and the last line: which steps failed (exit 1), or that none did (exit 0)
finish() {
  local line row
  clean_tmp
  {
    echo "== steps (seconds; each ends by start + limit + grace <= TOTAL_S=$TOTAL_S):"
    printf '   %-12s %5s %5s %5s %7s %7s\n' step start limit grace elapsed rc
    for row in "${SUMMARY[@]}"; do
      # shellcheck disable=SC2086  # the row's six words
      printf '   %-12s %5s %5s %5s %7s %7s\n' $row
    done
    echo "== total $(( $(date +%s) - START ))s; files in $OUT: $(cd "$OUT" && ls -A | tr '\n' ' ')"
  } >> "$LOG"
  cat "$@" "$LOG" 2>/dev/null | tail -80
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

# shellcheck disable=SC2086  # SRC is one or more flags
probe random06b 20 $SRC

# shellcheck disable=SC2086
if probe rerun 20 $SRC --no-knobs || [[ -s "$OUT/rerun.json" ]]; then
  if [[ -s "$OUT/random06b.json" && -s "$OUT/rerun.json" ]]; then
    limited determinism 5 "$PY" -c "$DETERMINISM" "$OUT/random06b.json" "$OUT/rerun.json" >> "$LOG" 2>&1
    rc=$?
    echo "== determinism: rc=$rc in ${LAST_S}s" >> "$LOG"
    (( rc == 0 )) || failed "determinism ($(why $rc))"
  else
    echo "== determinism: skipped (random06b.json or rerun.json missing)" >> "$LOG"
  fi
fi

profile

REAL="${QWEN3_PATH:-}"
if [[ -z "$REAL" ]]; then
  HUB="${HF_HUB_CACHE:-${HF_HOME:-${HOME:-/root}/.cache/huggingface}/hub}"  # set -u: HOME may be unset
  for d in "$HUB"/models--Qwen--Qwen3-0.6B/snapshots/*/; do [[ -f "$d/config.json" ]] && REAL="$d" && break; done
fi
if [[ -n "$REAL" ]]; then
  probe real06b 60 --model "$(from_start "$REAL")"
else
  echo "== real06b: skipped, no local Qwen3-0.6B (set QWEN3_PATH or fill the HF cache)" >> "$LOG"
fi
finish "$TABLES" "$OUT/profile.txt"
