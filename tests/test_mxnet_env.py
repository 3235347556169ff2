"""scripts/mxnet-env.sh, which `make mxnet-env` runs: where no Python its pins support (3.8 to 3.11)
runs here, it says in one line what to install and succeeds, so `make test` goes on and the MXNet
tests skip; an environment left with an unsupported interpreter is not kept."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "mxnet-env.sh"


def fake_python(path: Path, says: str) -> Path:
    """An executable that fails every check the script makes, with `says` on stderr (a pyenv shim
    of a version not selected, or a Python newer than the pins allow)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{says}' >&2\nexit 1\n")
    path.chmod(0o755)
    return path


def run_script(venv: Path, candidates: list[Path]) -> subprocess.CompletedProcess:
    env = {**os.environ, "MXNET_PYTHONS": " ".join(str(c) for c in candidates)}
    return subprocess.run([str(SCRIPT), str(venv)], capture_output=True, text=True, env=env, timeout=60)


def test_without_a_supported_python_it_says_what_to_install_and_succeeds(tmp_path):
    shim = fake_python(tmp_path / "shims" / "python3.11", "pyenv: python3.11: command not found")
    newer = fake_python(tmp_path / "bin" / "python3.12", "Python 3.12")
    done = run_script(tmp_path / "venv", [shim, newer])
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Python 3.8 to 3.11" in lines[0] and "install python3.11" in lines[0]
    assert not (tmp_path / "venv").exists()


def test_an_environment_with_an_unsupported_interpreter_is_not_kept(tmp_path):
    venv = tmp_path / "venv"
    fake_python(venv / "bin" / "python", "Python 3.12")  # left by an earlier try with PYTHON=python3.12
    done = run_script(venv, [tmp_path / "none" / "python3.11"])
    assert done.returncode == 0, done.stderr
    assert not venv.exists()
