#!/usr/bin/env bash
# The README's test command. On a fresh Debian machine it:
#   1. makes a fresh virtualenv (.venv-test) and installs the project with its test extras
#      there, so an undeclared import fails here as it would on a user's machine;
#   2. installs and starts the services the tiers use (scripts/setup-services.sh);
#   3. builds the Keras half of the model zoo where files are missing or stale (built by an
#      older recipe: scripts/make_keras_zoo.py keys them by its hash), in its own fresh
#      virtualenv (.venv-zoo, extras: zoo: TensorFlow stays out of the tested one);
#   4. lints, runs every test tier and the shared conformance cases (../shared);
#   5. in a third fresh virtualenv with only the extras the README's main job names
#      (farm, gpu), runs the README's main job and the dataset/accuracy tools.
# Under CI=true nothing is skipped: a missing service, oracle or ../shared fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
in_ci=false
case "${CI:-}" in 1 | true | TRUE | yes) in_ci=true ;; esac

# Each step's wall time, printed as it ends and again, all together, at the end.
step_name="" step_start=$SECONDS timings=""
step() { # step TITLE: ends the step before (printing its time) and starts TITLE
  if [ -n "$step_name" ]; then
    local took=$((SECONDS - step_start))
    echo "== $step_name: ${took} s"
    timings+="$(printf '%6d s  %s' "$took" "$step_name")"$'\n'
  fi
  step_name=$1 step_start=$SECONDS
  [ -z "$1" ] || echo "== $1"
}

fresh_venv() { # fresh_venv DIR EXTRAS: a new virtualenv at DIR with the project and EXTRAS
  rm -rf "$1"
  python3 -m venv "$1"
  "$1/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$1/bin/python" -m pip install -q -e ".[$2]"
}

conformance_modes() { # conformance_modes SHARED "TITLE|CHECK ARGS|ENV"...: the modes, one per
  # CPU at a time (slowest first), each printed whole as it ends; fails if any mode failed
  local shared=$1 failed=0 mode logs i=0 pids=()
  shift
  logs=$(mktemp -d)
  for mode in "$@"; do
    IFS='|' read -r title args env <<<"$mode"
    while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
    # shellcheck disable=SC2086 # ARGS and ENV are word lists
    (env $env python "$shared/check.py" "$shared/dev" $args >"$logs/$i" 2>&1; echo $? >"$logs/$i.rc") &
    pids+=("$!")
    i=$((i + 1))
  done
  wait "${pids[@]}" || true
  i=0
  for mode in "$@"; do
    echo "-- conformance ${mode%%|*}: exit $(cat "$logs/$i.rc")"
    cat "$logs/$i"
    [ "$(cat "$logs/$i.rc")" = 0 ] || failed=1
    i=$((i + 1))
  done
  rm -rf "$logs"
  return $failed
}

# Warm or cold: whether this machine's kernel cache held anything when the run began (the
# test step's time budget depends on it, scripts/step_budget.py).
kernel_cache="${XDG_CACHE_HOME:-$HOME/.cache}/devicefarm/kernels"
caches=cold
[ -n "$(ls -A "$kernel_cache" 2>/dev/null)" ] && caches=warm

step "install (fresh virtualenv .venv-test, extras: dev)"
fresh_venv .venv-test dev
# shellcheck disable=SC1091
. .venv-test/bin/activate
bash scripts/setup-services.sh

# the folder tests/models reads the Keras files from, if any file of the zoo is missing or stale
keras_out=$(python -c '
from labkit import zoo
missing = [m for m in zoo.KERAS_MODELS if zoo.keras_model(*m) is None]
print(zoo.zoo_dir() / "keras" if missing else "")')
# the whole run's budget is a cold run's where the zoo is built (11-13 minutes of one core's
# time, built a process per CPU)
total_caches=$caches
if [ -n "$keras_out" ]; then
  total_caches=cold
  step "Keras zoo (scripts/make_keras_zoo_parallel.py: a process per CPU, into $keras_out; fresh virtualenv .venv-zoo, extras: zoo)"
  fresh_venv .venv-zoo zoo
  .venv-zoo/bin/python scripts/make_keras_zoo_parallel.py --out "$keras_out"
else
  echo "== Keras zoo: every file present"
fi

step "lint"
ruff check .
ruff format --check .

step "tests (pytest-xdist, ${DEVICEFARM_TEST_WORKERS:-auto} workers; kernel caches $caches)"
export DEVICEFARM_TEST_PG_URL="${DEVICEFARM_TEST_PG_URL:-postgresql+psycopg2://postgres:postgres@127.0.0.1:5432/postgres}"
# the dashboard's pages as the browser test saw them (screenshots and text), for review
export DEVICEFARM_SCREENSHOTS="${DEVICEFARM_SCREENSHOTS:-$root/artifacts/dashboard}"
mkdir -p "$DEVICEFARM_SCREENSHOTS"
# One worker per CPU; every test makes its own servers, ports, databases and folders, so the
# workers share nothing but the content-keyed kernel caches (written atomically).
python -m pytest -q -p no:cacheprovider --timeout=600 --durations=30 \
  -n "${DEVICEFARM_TEST_WORKERS:-auto}" --dist worksteal tests
python3 scripts/step_budget.py tests $((SECONDS - step_start)) "$caches"

shared="../shared/conformance"
if [ -d "$shared/dev" ]; then
  step "conformance (CPU reference; GPU delegate fp32, fp16; kernels specialized per launch as on GPUs, fp32, fp16)"
  conformance_modes "$shared" \
    "cpu reference|--delegate cpu" \
    "specialized fp32|--delegate gpu --precision fp32|DEVICEFARM_GPU_SPECIALIZE=1" \
    "specialized fp16|--delegate gpu --precision fp16|DEVICEFARM_GPU_SPECIALIZE=1" \
    "gpu fp32|--delegate gpu --precision fp32" \
    "gpu fp16|--delegate gpu --precision fp16"
elif $in_ci; then
  echo "conformance: $shared/dev is missing; CI needs ../shared beside the checkout" >&2
  exit 1
else
  echo "== conformance SKIPPED: $shared/dev is missing (CI fails here)" >&2
fi
deactivate

step "README main job (fresh virtualenv .venv-readme, extras: farm,gpu)"
fresh_venv .venv-readme farm,gpu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(
  cd "$work"
  export DEVICEFARM_HOME="$work/.devicefarm"
  df="$root/.venv-readme/bin/devicefarm"
  "$df" example example.tflite
  "$df" run example.tflite
  "$df" make-dataset classification --out data
  "$df" accuracy classification --model data/classifier.tflite --images data/images \
    --ground_truth_labels data/ground_truth_labels.txt \
    --model_output_labels data/model_output_labels.txt
)
step ""
echo "== done in $SECONDS s (kernel caches $caches at the start, the run's caches $total_caches); the steps:"
printf '%s' "$timings"
python3 scripts/step_budget.py total "$SECONDS" "$total_caches"
