"""VLA-Arena's older task files: every distinct ``.bddl`` content in its git history that is not
one of the current files, as test data (tests_arena/test_vla_arena_history.py).

    python scripts/vla_arena_history.py --git-dir PATH/TO/VLA-Arena/.git \
        [--current ../shared/vla-arena/bddl_files] [--out ../shared/vla-arena/history]

Every commit of every ref is read (``git rev-list --all``, newest first); a content is kept
once, under the newest commit holding it: ``<out>/<short commit>/<path below bddl_files>``.
Contents equal to a file of ``--current`` (VLA-Arena's files as shipped) are left out. Writes
``MANIFEST.tsv`` (short commit, commit date, path in the repository, git blob) beside them.
The files are VLA-Arena's (Apache-2.0, copyright its authors); this only copies them out.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

PREFIX = "vla_arena/vla_arena/bddl_files/"
HERE = Path(__file__).resolve().parent.parent


def git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True,
                          capture_output=True, text=True).stdout


def blob_id(data: bytes) -> str:
    """The git blob id of ``data`` (as ``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def collect(git_dir: Path, current: Path, out: Path) -> list[tuple[str, str, str, str]]:
    """Write the historical files and return the manifest rows."""
    known = {blob_id(p.read_bytes()) for p in current.rglob("*.bddl")}
    rows = []
    for commit in git(git_dir, "rev-list", "--all", "--topo-order").split():
        short, date = git(git_dir, "show", "-s", "--format=%h %cs", "--abbrev=7",
                          commit).split()
        for line in git(git_dir, "ls-tree", "-r", commit).splitlines():
            meta, path = line.split("\t", 1)
            blob = meta.split()[2]
            if not path.endswith(".bddl") or blob in known:
                continue
            known.add(blob)
            rel = path.removeprefix(PREFIX)
            dest = out / short / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(git(git_dir, "cat-file", "-p", blob))
            rows.append((short, date, path, blob))
    with (out / "MANIFEST.tsv").open("w") as fh:
        fh.write("commit\tdate\tpath\tblob\n")
        fh.writelines("\t".join(r) + "\n" for r in rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--git-dir", type=Path, required=True)
    ap.add_argument("--current", type=Path,
                    default=HERE.parent / "shared" / "vla-arena" / "bddl_files")
    ap.add_argument("--out", type=Path, default=HERE.parent / "shared" / "vla-arena" / "history")
    args = ap.parse_args(argv)
    rows = collect(args.git_dir, args.current, args.out)
    size = sum((args.out / r[0] / r[2].removeprefix(PREFIX)).stat().st_size for r in rows)
    print(f"{len(rows)} historical task files ({size} bytes) in {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
