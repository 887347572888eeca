"""Huge and undecodable inputs are rejected with one line, and reading them costs a bounded
amount of memory (peak RSS of the real process, measured by the kernel)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import run_robosafe as run
from factories import make_episode

from robosafe.trace.io import write_episodes

CLAIMS = "benchmark,tasks,samples,previous,new\nlibero,10,50,0.5,0.6\n"


# VmHWM is the peak RSS of this process image; getrusage's ru_maxrss would also carry the
# parent's peak across fork + exec, so a big pytest process would inflate every measure.
_PEAK = ('[int(line.split()[1]) for line in open("/proc/self/status") '
         'if line.startswith("VmHWM:")][0]')


def _peak_mib(*args) -> tuple[subprocess.CompletedProcess, float]:
    """Run robosafe in a fresh process and return it with its peak RSS in MiB."""
    code = ("import runpy, sys\n"
            f"sys.argv = ['robosafe', *{list(args)!r}]\n"
            "try:\n"
            "    runpy.run_module('robosafe', run_name='__main__')\n"
            "finally:\n"
            "    sys.stdout.flush()\n"
            f"    sys.stderr.write(f'\\nPEAK_KIB {{{_PEAK}}}\\n')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)
    peak = int(proc.stderr.rsplit("PEAK_KIB", 1)[1]) / 1024
    return proc, peak


def test_claims_not_utf8_is_one_line(tmp_path):
    p = tmp_path / "claims.csv"
    p.write_bytes((CLAIMS + "caf\xe9,10,50,0.5,0.6\n").encode("latin-1"))
    proc = run("audit", "significance", str(p))
    assert proc.returncode == 2
    assert f"{p}: not a readable UTF-8 CSV" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_claims_field_over_128_kib_is_one_line(tmp_path):
    p = tmp_path / "claims.csv"
    p.write_text(CLAIMS + '"' + "x" * (200 << 10) + '",10,50,0.5,0.6\n')
    proc = run("audit", "significance", str(p))
    assert proc.returncode == 2
    assert "field larger than field limit (131072)" in proc.stderr


@pytest.fixture(scope="module")
def huge(tmp_path_factory):
    """A 512 MiB file that is one line: as a CSV, a JSONL trace and a JSON trace."""
    path = tmp_path_factory.mktemp("huge") / "huge.jsonl"
    with path.open("wb") as fh:
        fh.write(b'{"episode_id": "')
        block = b"x" * (1 << 20)
        for _ in range(512):
            fh.write(block)
    yield path
    path.unlink()


def test_huge_claims_csv_is_rejected_in_bounded_memory(huge):
    csv = huge.with_suffix(".csv")
    huge.rename(csv)
    try:
        proc, peak = _peak_mib("audit", "significance", str(csv))
    finally:
        csv.rename(huge)
    assert proc.returncode == 2 and f"{csv}:1: line longer than 1 MiB" in proc.stderr
    # before: the file was read whole and split into lines, ~2 x 512 MiB
    assert peak < 400, peak


@pytest.mark.slow
def test_huge_traces_are_skipped_in_bounded_memory_and_good_ones_scored(huge, tmp_path):
    good = tmp_path / "good.jsonl"
    # contacts recorded (none happening): a scored episode, not an unscored one
    write_episodes(good, [make_episode(4, episode_id="good", contacts=[[]] * 4)])
    as_json = tmp_path / "huge.json"
    as_json.symlink_to(huge)
    proc, peak = _peak_mib("score", str(huge), str(as_json), str(good), "--bootstrap", "0",
                           "--table", "main")
    assert proc.returncode == 2
    assert f"{huge}:1: line longer than 64 MiB" in proc.stderr
    assert f"{as_json}: larger than 256 MiB" in proc.stderr
    assert "1 episodes scored, 2 skipped" in proc.stdout
    assert peak < 900, peak  # before: 2.4 GB for two 512 MiB files


def test_huge_answers_file_is_one_line(huge):
    proc, peak = _peak_mib("grounding", "score", str(huge))
    assert proc.returncode == 2 and f"{huge}:1: line longer than 1 MiB" in proc.stderr
    assert peak < 400, peak


def test_peak_measure_sees_allocation():
    """The measure itself: a process that allocates 300 MiB reports at least that."""
    code = f"b = bytearray(300 << 20)\nb[::4096] = b'x' * len(b[::4096])\nprint({_PEAK})"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert int(out) / 1024 >= 300


def test_huge_task_file_is_rejected_in_bounded_memory(huge):
    bddl = huge.with_suffix(".bddl")
    huge.rename(bddl)
    try:
        proc, peak = _peak_mib("tasks", "check", str(bddl))
    finally:
        bddl.rename(huge)
    assert proc.returncode == 2 and f"{bddl}: larger than 4 MiB; not a task file" in proc.stderr
    assert peak < 400, peak  # before: the file was read and decoded whole
