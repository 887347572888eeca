"""`robosafe score DIR` on a folder that is neither a run directory nor a LeRobot dataset:
every trace file below it is scored, run directories below it keep their meaning, and stderr
says how many of which kind were found."""

import json

from factories import make_run, synthetic_episodes

from robosafe.trace.io import write_episodes


def test_a_folder_of_traces_is_every_trace_below_it(cli, tmp_path):
    top = tmp_path / "rollouts"
    (top / "sub").mkdir(parents=True)
    eps = synthetic_episodes(3)
    write_episodes(top / "a.jsonl", eps[:2])
    write_episodes(top / "sub" / "b.parquet", eps[2:])
    (top / "notes.txt").write_text("not a trace\n")
    (top / ".partial-c.jsonl").write_text("{half a line")  # a killed writer's leftovers
    make_run(top / "sub" / "run", n=3, crashed=(1,), policy="q")  # 2 finished episodes
    proc = cli("score", top, "--json", "--bootstrap", "0")
    assert proc.returncode == 0, proc.stderr
    cells = {c["policy"]: c["n"] for c in json.loads(proc.stdout)["cells"]}
    assert cells == {"p": 3, "q": 2}
    assert (f"{top}: scoring 1 jsonl trace file(s), 1 parquet trace file(s), 1 run directory "
            "found below it") in proc.stderr
    assert "unknown trace file suffix" not in proc.stderr


def test_a_folder_with_nothing_to_score_is_one_line(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x\n")
    proc = cli("score", tmp_path / "empty")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        (f"robosafe: error: {tmp_path / 'empty'}: a folder with no trace file (.json, "
        ".jsonl[.gz], .parquet), run directory or LeRobot dataset below it")]
