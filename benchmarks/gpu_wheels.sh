#!/usr/bin/env bash
# The wheels a GPU machine (no network, Python 3.12) needs to run this checkout, into .whl/ (git-ignored).
# Since the package supports transformers 5 and numpy 2 (issue 41), the image's own transformers,
# huggingface_hub, numpy, torch and Lightning are used as they are: only what such an image lacks is
# fetched (soundfile, soxr and their cffi, platformdirs, xxhash). ../shared/gpu/fetch-wheels.sh, which
# also fetches transformers 4.57 for the older checkouts, is no longer needed.
# Run once from anywhere in the project; carry .whl to the device and install as ../shared/gpu/README.md says.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx "/.whl/" .git/info/exclude 2>/dev/null || echo "/.whl/" >> .git/info/exclude
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
  soundfile==0.14.0 soxr==1.1.0 cffi==1.17.1 pycparser==2.22 platformdirs==4.3.8 xxhash==3.5.0 \
  ctranslate2==4.8.5 faster-whisper==1.2.1 av==18.1.0 onnxruntime==1.32.0  # gpu_check.sh's engines step (ctranslate2's wheel carries its CUDA kernels)
cp ../shared/gpu/check.py .whl/check.py 2>/dev/null || true  # the shared end-to-end check, where ../shared is beside
ls .whl
