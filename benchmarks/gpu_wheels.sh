#!/usr/bin/env bash
# The wheels a GPU machine (no network, Python 3.12) needs to run this checkout, into .whl/ (git-ignored):
# those of ../shared/gpu/fetch-wheels.sh (transformers 4.57 and what that image lacks), plus the
# project's dependencies that script predates: xxhash (the store's data digests, since issue 34).
# Run once from anywhere in the project; carry .whl to the device and install as ../shared/gpu/README.md says.
set -euo pipefail
cd "$(dirname "$0")/.."
"${FETCH_WHEELS:-../shared/gpu/fetch-wheels.sh}"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "xxhash==3.5.0"
ls .whl
