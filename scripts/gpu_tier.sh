#!/usr/bin/env bash
# The GPU-machine tier (tests/gpu_machine): the farm's own flows on the GPU machine with
# default settings. Run through the `device` tool from the repository root, carrying
# `.whl` (wheels for Python 3.12: the farm and gpu extras, pytest) and `.gpu` (the model):
#   bash scripts/gpu_tier.sh [pytest args...]
# It registers NVIDIA's OpenCL driver with the ICD loader, installs the wheels into
# /tmp/site, and runs the tier; with $OUT set, the log lands there too.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p /tmp/icd
echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 >/tmp/icd/nvidia.icd
export OCL_ICD_VENDORS=/tmp/icd
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$(pwd)" DEVICEFARM_GPU_TIER=1 PYTHONUNBUFFERED=1
export DEVICEFARM_GPU_TIER_MODEL="${DEVICEFARM_GPU_TIER_MODEL:-$(pwd)/.gpu/mobilenet_v1_1.0_224_fp32.tflite}"
log="${OUT:-/tmp}/gpu_tier.log"
set -o pipefail
python3 -m pytest -p no:cacheprovider -s -v --timeout=1800 tests/gpu_machine "$@" 2>&1 | tee "$log"
