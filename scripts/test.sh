#!/usr/bin/env bash
# The README's test command: install the project with its test extras, start services,
# lint, run every test tier and the shared conformance cases.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install -q --upgrade pip >/dev/null 2>&1 || true
python3 -m pip install -q -e '.[dev]'
bash scripts/setup-services.sh

echo "== lint"
ruff check .
ruff format --check .

echo "== tests"
export DEVICEFARM_TEST_PG_URL="${DEVICEFARM_TEST_PG_URL:-postgresql+psycopg2://postgres:postgres@127.0.0.1:5432/postgres}"
python3 -m pytest -q -p no:cacheprovider --timeout=600 tests

shared="../shared/conformance"
if [ -d "$shared/dev" ]; then
  echo "== conformance (CPU reference)"
  python3 "$shared/check.py" "$shared/dev" --delegate cpu
  if python3 -c "import delegate_runtime.gpu.delegate" 2>/dev/null; then
    echo "== conformance (GPU delegate on OpenCL, fp32 and fp16)"
    python3 "$shared/check.py" "$shared/dev" --delegate gpu --precision fp32
    python3 "$shared/check.py" "$shared/dev" --delegate gpu --precision fp16
  fi
fi
