"""The layers run one way and the build checks it: import-linter's contracts (pyproject.toml,
`[tool.importlinter]`) pass on the tree, and fail on a tree where a sweep module imports the report."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")  # the dev extra's import-linter


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=tree, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)


def _copy_tree(to: Path) -> Path:
    for part in ("sizer", "workloads", "reports"):
        shutil.copytree(ROOT / part, to / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", to / "pyproject.toml")
    return to


def test_the_contracts_hold_on_the_tree():
    run = _lint(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"Contracts: (\d+) kept, 0 broken", run.stdout)


def test_a_sweep_module_importing_the_report_breaks_the_layers(tmp_path):
    tree = _copy_tree(tmp_path)
    refine = tree / "sizer" / "sweep" / "refine.py"
    refine.write_text(refine.read_text() + "\nfrom sizer.report import build_context  # noqa: E402,F401\n")
    run = _lint(tree)
    assert run.returncode != 0
    assert "sizer.sweep is not allowed to import sizer.report" in run.stdout
    assert "sizer.sweep.refine -> sizer.report" in run.stdout


def test_the_model_reading_the_workload_registry_breaks_the_facts_contract(tmp_path):
    tree = _copy_tree(tmp_path)
    fit = tree / "sizer" / "model" / "fit.py"
    fit.write_text(fit.read_text() + "\nfrom workloads import declares_reads_once  # noqa: E402,F401\n")
    run = _lint(tree)
    assert run.returncode != 0 and "sizer.model is not allowed to import workloads" in run.stdout


def test_no_project_import_hides_inside_a_function_but_for_a_heavy_optional_dependency():
    """Imports of sizer's and the workloads' modules sit at the top of each module, where a cycle
    shows; none of those modules needs torch, ray, pynvml or mxnet to be imported."""
    import ast

    hidden = []
    for path in sorted((ROOT / "sizer").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for inner in ast.walk(node):
                module = inner.module if isinstance(inner, ast.ImportFrom) else None
                names = [a.name for a in inner.names] if isinstance(inner, ast.Import) else [module or ""]
                if any(n == "sizer" or n.startswith(("sizer.", "workloads")) for n in names):
                    hidden.append(f"{path.relative_to(ROOT)}:{inner.lineno}")
    assert not hidden, hidden
