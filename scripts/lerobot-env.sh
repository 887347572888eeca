#!/usr/bin/env bash
# LeRobot's own tools next to robosafe and its simulator, to check that the datasets robosafe
# writes are accepted end to end and that LeRobot checkpoints run in robosafe (tests_lerobot):
#   bash scripts/lerobot-env.sh .venv-lerobot
# lerobot[dataset]==0.6.1 needs Python >= 3.12 (its source uses 3.12 syntax), torch >=2.7,<2.12,
# numpy 2 and pyarrow >= 21 (26.0.1 here, what a fresh lerobot[dataset] install gets).
#
# torch: PyPI has no CPU-only torch for Linux x86_64; on Python 3.12 pip takes torch 2.11.0
# (a 530 MB CUDA wheel) plus about 3 GB of nvidia-* wheels it pins exactly. This machine keeps
# the same CUDA 13 libraries (other patch releases, same sonames) on disk for its own torch, so
# torch goes in with --no-deps and the nvidia libraries from that disk: the download is the
# torch wheel alone. Where those files are absent, pip fetches torch's own pins (a CUDA build of
# several GB); nothing here uses a GPU. Everything else comes from scripts/lerobot-lock.txt
# with --no-deps, so pip cannot pull torch's pins back in.
set -euo pipefail
venv=${1:-.venv-lerobot}
here=$(cd "$(dirname "$0")/.." && pwd)

py=""
if command -v pyenv >/dev/null && [ -x "$(pyenv root)/versions/3.12.1/bin/python" ]; then
  py="$(pyenv root)/versions/3.12.1/bin/python"
elif command -v python3.12 >/dev/null && python3.12 -c 'import venv' 2>/dev/null; then
  py=python3.12
fi
if [ -z "$py" ]; then
  echo "lerobot-env: no Python 3.12 found (lerobot 0.6.1 needs >= 3.12): install one, e.g. 'pyenv install 3.12' or 'apt-get install python3.12-venv', then rerun" >&2
  exit 2
fi

[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
pip=(python3 "$here/scripts/install.py" "$venv")
if ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  "${pip[@]}" --no-deps "torch==2.11.0"
  local_libs=(nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
    nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse
    nvidia-cusparselt-cu13 nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx)
  if ! "${pip[@]}" --no-deps --no-index --find-links /opt/pypi-more/files \
      --find-links /opt/pypi/files "${local_libs[@]}" 2>/dev/null; then
    echo "lerobot-env: CUDA libraries not on this disk; pip downloads torch's own (several GB)" >&2
    "${pip[@]}" "torch==2.11.0"
  fi
fi
"${pip[@]}" --no-deps -r "$here/scripts/lerobot-lock.txt"
# robosafe's simulator beside lerobot (numpy 2): the supported route, see the file
"${pip[@]}" --no-deps -r "$here/scripts/sim-beside-lerobot.txt"
"${pip[@]}" --no-deps -e "$here"
# torchcodec needs FFmpeg's shared libraries, which this machine lacks: the tests use
# lerobot's pyav video backend (PyAV ships its own FFmpeg).
"$venv/bin/python" -c 'import torch, lerobot, lerobot_doctor, robosafe, robosuite, accelerate' 
