#!/usr/bin/env bash
# Issue 34's GPU measurements in one device call, into $OUT (gpu_check.log and the benchmarks' JSON).
# STEPS (default: all six) picks among:
#   extraction  every site of a large-v3-sized Whisper, every row (ours cold and warm, the command,
#               the encoder bound, the published loop, the raw write), the stages of ours timed;
#   before      ours cold and warm with the older checkout, on the same machine;
#   parts       ours warm in parts of 40 clips (4 part ends in 160 clips), this checkout and the older;
#   writer      the store's writer against a raw write (the older writer interleaved);
#   threads     the probe solver's thread sweep on the host's cores;
#   engines     Whisper transcription at large-v3 dimensions: ours (--engine ctranslate2) against faster-whisper's
#               BatchedInferencePipeline and transformers batched with SDPA, on the same clips (benchmarks/whisper_engines.py;
#               its CPU dry run: --device cpu --dims tiny --clips 4 --batch-size 2 --rounds 1).
#
# Prepare here (the device machine gets the project folder only, with no network):
#   benchmarks/gpu_wheels.sh                                   # .whl/: the wheels the image lacks
#   mkdir .gpu-before && git archive <commit> extract probing experiments | tar -x -C .gpu-before
#   (both folders git-ignored: `/.whl/` and `/.gpu-before/` in .git/info/exclude)
# Then, as the device call's command, carrying .whl and .gpu-before:
#   bash benchmarks/gpu_check.sh <this commit> <the older commit>
#   STEPS="extraction parts" bash benchmarks/gpu_check.sh ...          # some steps only
# Each step has its own time limit, so a slow step costs only itself; what ran is in the log.
set -uo pipefail
after=${1:-after}
before=${2:-before}
OUT=${OUT:-$(mktemp -d)}
export OUT
site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1
log=$OUT/gpu_check.log
work=$(mktemp -d)

step() {  # step NAME SECONDS PYTHONPATH COMMAND...
  local name=$1 limit=$2 path=$3
  shift 3
  echo "=== $name ($(date -u +%H:%M:%S), limit ${limit}s): $*" | tee -a "$log"
  PYTHONPATH=$site:$path timeout "$limit" "$@" 2>&1 | tee -a "$log"
  echo "=== $name: exit ${PIPESTATUS[0]}" | tee -a "$log"
}

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc; df -h "$work"; } 2>&1 | tee -a "$log"
steps=${STEPS:-extraction before parts writer threads engines}
has() { [[ " $steps " == *" $1 "* ]]; }
bench=(python3 benchmarks/extraction.py --device cuda --dims large-v3 --random-init --stages --work "$work")
older=$PWD/.gpu-before
[ -d "$older/extract" ] || older=
has extraction && step extraction 300 "$PWD" "${bench[@]}" --tag "$after"
[ -n "$older" ] && has before && step extraction-before 150 "$older" "${bench[@]}" --only ours ours-warm --tag "$before"
if has parts; then
  step parts 120 "$PWD" "${bench[@]}" --only ours-warm --utterances-per-part 40 --tag "$after"
  [ -n "$older" ] && step parts-before 120 "$older" "${bench[@]}" --only ours-warm --utterances-per-part 40 --tag "$before"
fi
has writer && step store-writer 150 "$PWD" python3 benchmarks/store_writer.py --dims large-v3 base --repeats 2 --folder "$work/writer" --json "$OUT/store_writer.json" ${older:+--baseline "$older"}
has threads && step probe-threads 120 "$PWD" python3 benchmarks/probes.py --threads 2 16 --before 2
has engines && step whisper-engines 420 "$PWD" python3 benchmarks/whisper_engines.py --device cuda --dims large-v3 --clips 64 --batch-size 16 --rounds 3 --json "$OUT/whisper_engines.json"
rm -rf "$work" "$site"
