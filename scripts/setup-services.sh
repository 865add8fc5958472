#!/usr/bin/env bash
# Install (when missing) and start the services the test tiers use: redis-server,
# PostgreSQL, Debian's adb, headless Chromium, clang (a compile check of the
# half-arithmetic kernels) and Debian's PoCL; and install PgBouncer, which the tests start
# themselves (tests/integration/test_pgbouncer.py). Prints what it does; safe to re-run.
set -euo pipefail

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v pg_ctlcluster >/dev/null || missing+=(postgresql)
command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
command -v adb >/dev/null || missing+=(adb)
command -v chromium >/dev/null || missing+=(chromium chromium-driver)
compgen -c clang | grep -qE '^clang(-[0-9]+)?$' || missing+=(clang)
# The PoCL inside pyopencl's wheel (3.0, LLVM 14) cannot compile on CPUs newer than LLVM 14
# knows ("unknown target CPU 'generic'" on AMD Zen 5). Debian's PoCL (LLVM 15) falls back to
# a known CPU; pyopencl's ICD loader reads /etc/OpenCL/vendors and lists it first.
[ -e /etc/OpenCL/vendors/pocl.icd ] || missing+=(pocl-opencl-icd)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Redis on 127.0.0.1:6379, no persistence (tests start their own too, on free ports).
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "setup: starting redis-server on 127.0.0.1:6379"
  $SUDO mkdir -p /var/lib/redis /var/log/redis
  $SUDO redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
fi

# PostgreSQL on 127.0.0.1:5432; user postgres with password "postgres" for TCP logins.
if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -1)
  if [ -z "$version" ]; then
    echo "setup: no PostgreSQL cluster found" >&2; exit 1
  fi
  echo "setup: starting PostgreSQL $version"
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$version" main start
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi
if ! PGPASSWORD=postgres psql -h 127.0.0.1 -U postgres -d postgres -tAc 'select 1' >/dev/null 2>&1; then
  echo "setup: giving the postgres role a password for TCP logins"
  $SUDO -u postgres psql -q -c "ALTER USER postgres PASSWORD 'postgres'" 2>/dev/null \
    || su postgres -c "psql -q -c \"ALTER USER postgres PASSWORD 'postgres'\""
fi

# adb server (Debian's), started once; tests use their own port too.
adb start-server >/dev/null 2>&1 || true
echo "setup: services ready (redis, postgresql, adb, chromium, clang, pocl)"
