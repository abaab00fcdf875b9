"""The house stays readable: entry points stay thin and no function grows past what a reader holds in
view (docs/architecture.md, "Layers"; the import contract itself is `lint-imports`)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 60
ENTRY_POINTS = ("train", "evaluate", "play", "export", "bench", "bench_dist", "sweep_report", "compare")


def long_functions(root: Path, limit: int) -> list[str]:
    """``path:line name (n lines)`` (path relative to ``root``'s parent) of every function or method under
    ``root`` longer than ``limit``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({n} lines)")
    return found


def test_no_function_in_navexp_is_over_60_lines():
    """Every function and method of navexp/ and the sweeper plugin is at most 60 lines long."""
    assert long_functions(ROOT / "navexp", MAX_FUNCTION_LINES) == []
    assert long_functions(ROOT / "hydra_plugins", MAX_FUNCTION_LINES) == []


def test_the_measure_sees_a_long_function(tmp_path):
    """The check counts a function's lines from its def to its last line: 61 lines are too many."""
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(f"def f():\n{body}\n")
    assert long_functions(tmp_path / "pkg", MAX_FUNCTION_LINES) == ["pkg/m.py:1 f (61 lines)"]
    assert long_functions(tmp_path / "pkg", 61) == []


def test_entry_points_are_thin():
    """navexp/train.py is at most 150 lines (the Hydra main and its command-line glue), and every entry
    point is a module of at most 150 lines over the layers below it."""
    for name in ENTRY_POINTS:
        lines = len((ROOT / "navexp" / f"{name}.py").read_text().splitlines())
        assert lines <= 150, (name, lines)


def test_the_comparison_loads_no_learner():
    """``navexp.compare`` reads run directories: importing it loads no rsl_rl (the learner; only the
    checkpoint reader it defers does), though the config schemas it reads bring torch with the term
    registries."""
    import subprocess
    import sys

    code = "import sys, navexp.compare; print('rsl_rl' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "True"]
