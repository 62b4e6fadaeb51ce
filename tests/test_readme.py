"""The README's Python blocks run as the scripts a user would save them as, guard and local cluster included."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import python_blocks

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = python_blocks(README.read_text())


def test_the_readme_has_python_blocks_to_run():
    assert BLOCKS


def test_ci_runs_the_readmes_test_command():
    command = re.search(r"^python -m pip install .* && python -m pytest$", README.read_text(), re.M)
    ci = (README.parent / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert command and ci == command.group(0).replace("pip install", "pip install -q", 1)


@pytest.mark.slow  # each block starts its own local cluster: run by CI all the same
@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_a_readme_python_block_runs_as_a_script_and_writes_what_it_says(tmp_path, block):
    script = tmp_path / "readme.py"
    script.write_text(block)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    for written in re.findall(r"\.to_\w+\(\"([^\"]+)\"", block):
        assert (tmp_path / written).exists(), written
