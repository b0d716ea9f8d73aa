#!/usr/bin/env bash
# Issue 34's GPU measurements in one device call, into $OUT (gpu_check.log and the benchmarks' JSON):
# extraction of every site of a large-v3-sized Whisper (all rows, with the stages of ours timed),
# the same in-process run of an older checkout, the store's writer against a raw write (older
# writer interleaved), and the probe solver's thread sweep on the host's cores.
#
# Prepare here (the device machine gets the project folder only, with no network):
#   benchmarks/gpu_wheels.sh                                   # .whl/: the wheels the image lacks
#   mkdir .gpu-before && git archive <commit> extract probing experiments | tar -x -C .gpu-before
#   (both folders git-ignored: `/.whl/` and `/.gpu-before/` in .git/info/exclude)
# Then, as the device call's command, carrying .whl and .gpu-before:
#   bash benchmarks/gpu_check.sh <this commit> <the older commit>
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
step extraction 300 "$PWD" python3 benchmarks/extraction.py --device cuda --dims large-v3 --random-init --stages --work "$work" --tag "$after"
if [ -d .gpu-before/extract ]; then
  step extraction-before 120 "$PWD/.gpu-before" python3 benchmarks/extraction.py --device cuda --dims large-v3 --random-init --stages --work "$work" --only ours --tag "$before"
  baseline=(--baseline "$PWD/.gpu-before")
else
  baseline=()
fi
step store-writer 150 "$PWD" python3 benchmarks/store_writer.py --dims large-v3 base --repeats 2 --folder "$work/writer" --json "$OUT/store_writer.json" "${baseline[@]}"
step probe-threads 120 "$PWD" python3 benchmarks/probes.py --threads 2 16 --before 2
rm -rf "$work" "$site"
