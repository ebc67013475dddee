"""scripts/include-graph: the check `make check` runs on src/'s folders
finds a cycle between folders, and src/ has none."""
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "scripts" / "include-graph"


def run(src):
    return subprocess.run([str(TOOL), str(src)], capture_output=True, text=True)


def test_src_has_no_folder_cycle():
    r = run(REPO / "src")
    assert r.returncode == 0, r.stderr
    assert "no cycle" in r.stdout


def test_a_cycle_is_named_with_its_files(tmp_path):
    for folder, inc in (("a", "b/x.h"), ("b", "c/z.h"), ("c", "a/y.h")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "f.c").write_text(f'#include "{inc}"\n#include "{folder}/own.h"\n')
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "g.c").write_text('#include "a/y.h"\n')
    r = run(tmp_path)
    assert r.returncode == 1
    assert "a, b, c include each other" in r.stderr
    assert "a -> b: a/f.c" in r.stderr
    assert "d ->" not in r.stderr and "-> d" not in r.stderr
