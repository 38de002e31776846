"""The commit fence's clause mutants: each clause of its CHECK predicate dropped, negated, each conjunct
of it dropped, and a missing row read as true, one at a time, must fail tests/assistant/test_fence_clauses.py.

mutmut mutates Python inside functions and never reaches the SQL text of a module-level constant, yet
the fence is exactly such text (`FENCE_PREDICATES` in memframe/service/fence.py), so `make mutate` runs
these mutants after mutmut's, each in a private copy of the tree.

    python tools/fence_clause_mutants.py        # exit 1 when a mutant survives
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE = "memframe/service/fence.py"
TESTS = "tests/assistant/test_fence_clauses.py"
PYTEST = [sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-p", "no:randomly", "-p", "no:cacheprovider"]


@dataclass(frozen=True)
class Mutant:
    """One change to fence.py's text: `source[start:end]` becomes `after`."""

    what: str
    start: int
    end: int
    after: str


def _conjuncts(sql: str) -> list[tuple[int, int]]:
    """Where each top-level `AND` conjunct of `sql` starts and ends (none inside brackets)."""
    spans, depth, begin, i = [], 0, 0, 0
    while i < len(sql):
        if sql[i] == "(":
            depth += 1
        elif sql[i] == ")":
            depth -= 1
        elif depth == 0 and sql.startswith(" AND ", i):
            spans.append((begin, i))
            begin = i = i + len(" AND ")
            continue
        i += 1
    return [*spans, (begin, len(sql))]


def mutants(source: str) -> list[Mutant]:
    """Every clause mutant of `source` (fence.py's text)."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def span(node: ast.expr) -> tuple[int, int]:
        def at(line: int, col: int) -> int:  # ast columns count UTF-8 bytes
            return starts[line - 1] + len(lines[line - 1].encode()[:col].decode())

        return at(node.lineno, node.col_offset), at(node.end_lineno or node.lineno, node.end_col_offset or 0)

    found: list[Mutant] = []
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        name = getattr(target, "id", "")
        value = getattr(node, "value", None)
        if name == "FENCE_PREDICATES" and isinstance(value, ast.List):
            for clause in value.elts:
                assert isinstance(clause, ast.Tuple), ast.dump(clause)
                label, sql = (ast.literal_eval(e) for e in clause.elts)
                a, b = span(clause.elts[1])
                found.append(Mutant(f"dropped: {label}", a, b, '"1"'))
                found.append(Mutant(f"negated: {label}", a, b, repr(f"NOT ({sql})")))
                parts = _conjuncts(sql)
                for x, y in parts if len(parts) > 1 else []:
                    rest = " AND ".join(sql[p:q] for p, q in parts if (p, q) != (x, y))
                    row = sql[x:y].split(".")[0] + "."
                    if sql[x:y].endswith(" IS NOT NULL") and rest.startswith(row) and " = " in rest:
                        continue  # equivalent: where this is false, the `=` on the same row beside it is NULL
                    found.append(Mutant(f"conjunct dropped: {sql[x:y]} (of {label})", a, b, repr(rest)))
        elif name == "_PREDICATE" and value is not None:
            a, b = span(value)
            at = source.index(") IS TRUE", a, b) + len(") ")
            found.append(Mutant("a missing row read as true: IS TRUE -> IS NOT FALSE", at, at + 7, "IS NOT FALSE"))
    if not any(m.what.startswith("dropped: ") for m in found):
        raise SystemExit(f"no FENCE_PREDICATES list of (name, SQL) pairs found in {FENCE}")
    return found


def _pytest(tree: Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([*PYTEST, TESTS], cwd=tree, env=env, capture_output=True, check=False, timeout=600).returncode


def main() -> int:
    source = (ROOT / FENCE).read_text()
    found = mutants(source)
    with tempfile.TemporaryDirectory(prefix="memframe-fence-mutants-") as tmp:
        tree = Path(tmp)
        for name in ("memframe", "tests"):
            shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(ROOT / "pyproject.toml", tree)
        if _pytest(tree) != 0:
            raise SystemExit(f"{TESTS} fails on the unmutated code: fix that first")
        survivors = []
        for m in found:
            (tree / FENCE).write_text(source[: m.start] + m.after + source[m.end :])
            began = time.monotonic()
            code = _pytest(tree)
            verdict = {0: "SURVIVED", 1: "killed"}.get(code, f"killed (pytest exit {code})")
            print(f"{verdict:8} {m.what} ({time.monotonic() - began:.0f} s)", flush=True)
            if code == 0:
                survivors.append(m.what)
    print(f"fence clause mutants: {len(found)}, killed {len(found) - len(survivors)}, survived {len(survivors)}")
    return 1 if survivors else 0


if __name__ == "__main__":
    raise SystemExit(main())
