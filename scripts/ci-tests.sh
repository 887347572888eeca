#!/usr/bin/env bash
# Every test lane, nothing deselected, installs included (the README's test command):
#   bash scripts/ci-tests.sh
# It installs what the tests need itself: Debian's chromium (the HTML report's browser test) if
# missing, the dev environment `.venv` (`-e '.[sim,dev,probe,libero-assets]'`) and one
# environment per lane, all with scripts/install.py (uv handed pip's own settings; the sim
# lane's with pip itself, as the README's main job installs it). The chromium install and the
# lanes' environments start at once in the background, one build after another, beside the dev
# install; the LiteLLM proxy's venv (tests/litellm_proxy.py) first, since one main-suite test
# needs it (it waits on the venv's lock). Then the main suite (tests/, two pytest-xdist
# workers) runs in the foreground while those builds finish, then the tests marked serial with
# no other test process (timing-sensitive) but the base lane (small, no rendering), then the
# other four lanes two at a time: lerobot's (a LeRobot policy collected, trained and evaluated)
# beside LIBERO's, then beside sim's and arena's in turn (each lane is one pytest process, so
# two of them fill the two cores).
# A failed part never stops the others; each part's output is in .ci-logs/<part>.log (its test
# times in .ci-logs/<part>.xml), printed under a header, and the summary names every part with
# its status and wall time, then the whole run's, then the 30 slowest tests. The exit status
# is 1 if any part failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
logs=$root/.ci-logs
rm -rf "$logs" && mkdir -p "$logs"
ci_t0=$SECONDS

# name, command... : run one part with its output in $logs/name.log, its status and seconds in
# $logs/name.status
part() {
  local name=$1 t0=$SECONDS rc
  shift
  "$@" >"$logs/$name.log" 2>&1
  rc=$?
  # written whole, then renamed: a lane waiting for its build's status never reads half of it
  echo "$rc $((SECONDS - t0))" >"$logs/$name.status.tmp"
  mv "$logs/$name.status.tmp" "$logs/$name.status"
  return "$rc"
}

show() {  # the log of a finished part under a header
  echo
  echo "======== $1: $(status_word "$1") ========"
  cat "$logs/$1.log"
}

status_word() {
  local rc secs
  read -r rc secs <"$logs/$1.status"
  if [ "$rc" = 0 ]; then echo "ok (${secs} s)"; else echo "FAILED, exit $rc (${secs} s)"; fi
}

build_base() { python3 scripts/install.py .venv-base . pytest; }
build_sim() { [ -x .venv-sim/bin/python ] || python3 -m venv .venv-sim; \
  .venv-sim/bin/pip install -q --disable-pip-version-check --no-compile '.[sim]' pytest; }

install_chromium() { command -v chromium >/dev/null || \
  { apt-get update -qq && apt-get install -y -qq chromium; }; }
install_dev() { python3 scripts/install.py .venv -e '.[sim,dev,probe,libero-assets]'; }

part install-chromium install_chromium &
chromium=$!
builds=(litellm base libero arena lerobot sim)
(
  part build-litellm python3 tests/litellm_proxy.py
  part build-base build_base
  part build-libero bash scripts/libero-env.sh .venv-libero
  part build-arena bash scripts/vla-arena-env.sh .venv-arena
  part build-lerobot bash scripts/lerobot-env.sh .venv-lerobot
  part build-sim build_sim
) &
builder=$!

part install-dev install_dev
show install-dev
wait "$chromium"
show install-chromium
read -r dev_rc _ <"$logs/install-dev.status"
if [ "$dev_rc" != 0 ]; then
  wait "$builder"
  echo "ci-tests: the dev environment did not install: no test can run" >&2
  exit 1
fi

echo "======== main: .venv/bin/python -m pytest -n 2 (peer environments build meanwhile) ========"
t0=$SECONDS
# --dist loadfile keeps a file's tests on one worker, but for the files tests/conftest.py lists
# in SPREAD (long runs of independent cases), which fill whichever worker is free. Two workers,
# as many as cores: the builds meanwhile fill what a worker leaves idle while it waits (three
# workers: 683 s alone on a quiet machine, but 837 s beside the builds against 778 s with two)
.venv/bin/python -m pytest -n 2 --dist loadfile -m "not serial" --junitxml="$logs/main.xml" \
  2>&1 | tee "$logs/main.log"
echo "${PIPESTATUS[0]} $((SECONDS - t0))" >"$logs/main.status"

lane() {  # name, venv, folder, [env...]: the folder's tests in that venv, once it has built
  local name=$1 venv=$2 folder=$3 rc
  shift 3
  # each lane starts when its own environment is ready, not when the last one is
  until [ -f "$logs/build-$name.status" ]; do sleep 2; done
  read -r rc _ <"$logs/build-$name.status"
  if [ "$rc" != 0 ]; then
    echo "its environment ($venv) did not build: see build-$name above" >"$logs/$name.log"
    echo "1 0" >"$logs/$name.status"
  else
    part "$name" env "$@" "$venv/bin/python" -m pytest "$folder" -p no:cacheprovider \
      --junitxml="$logs/$name.xml"
  fi
}
# then the tests marked serial, with no other process of tests/ (together with main: every
# test of tests/, as a plain `pytest` runs)
# Only the files of tests/ that name the mark are collected, which saves importing every test
# module again (8 s -> 1 s): a test is marked in its own file (pytestmark, a decorator or
# pytest.param), so these are a superset of the files holding serial tests
mapfile -t serial_files < <(grep -lw serial tests/test_*.py)
# The base lane runs beside the serial part: it renders nothing and is small (about 20 s), and
# the serial tests leave a third of the two cores idle (Ray's processes starting). The lerobot
# lane is not small any more (it collects, trains and evaluates a LeRobot policy), so it runs
# in the last part, beside LIBERO's and then sim's and arena's, away from the timing-sensitive
# serial tests
lane base .venv-base tests_base &
small_lanes=$!
part serial .venv/bin/python -m pytest -m serial --junitxml="$logs/serial.xml" \
  "${serial_files[@]}"
show serial

lanes=(libero base sim arena lerobot)
lane libero .venv-libero tests_libero &
libero=$!
wait "$small_lanes"
lane lerobot .venv-lerobot tests_lerobot NUMBA_CACHE_DIR="$root/.venv-lerobot/numba-cache" &
lerobot=$!
wait "$libero"
lane sim .venv-sim tests_sim
# VLA-Arena's environment pins numba 0.61.2 and runs robosafe from this checkout, as LIBERO's
# (numba 0.68.1) does: numba keeps one cache index per function and Python version beside
# the source and drops another version's, so the two lanes side by side recompiled robosafe's
# kernels in turn, in nearly every process. The arena lane keeps its own cache.
lane arena .venv-arena tests_arena MUJOCO_GL=egl NUMBA_CACHE_DIR="$root/.venv-arena/numba-cache"
wait "$lerobot"
wait "$builder"
for b in "${builds[@]}"; do
  read -r rc _ <"$logs/build-$b.status"
  [ "$rc" = 0 ] || show "build-$b"
done
for l in "${lanes[@]}"; do show "$l"; done

echo
echo "======== summary ========"
failed=()
for p in install-chromium install-dev "${builds[@]/#/build-}" main serial "${lanes[@]}"; do
  printf '%-14s %s\n' "$p" "$(status_word "$p")"
  read -r rc _ <"$logs/$p.status"
  [ "$rc" = 0 ] || failed+=("$p")
done
echo "total          $((SECONDS - ci_t0)) s"
echo
echo "======== the 30 slowest tests (seconds, part, test) ========"
.venv/bin/python scripts/ci_slowest.py "$logs" 30
if [ ${#failed[@]} -gt 0 ]; then
  echo "ci-tests: failed: ${failed[*]} (logs in .ci-logs/)" >&2
  exit 1
fi
echo "ci-tests: every part passed"
