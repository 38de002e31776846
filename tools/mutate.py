"""`make mutate`: does the test suite kill what would break the contract?

A small mutation tester (no mutmut: see the README for why). For each module it makes
single-point mutants from the AST — comparisons flipped or loosened, `and`/`or` swapped,
`not` dropped, conditions negated, `break`/`continue` swapped, `+`/`-` swapped, numbers moved
by one (module-level constants both ways), `True`/`False` swapped — and, inside string
literals, SQL mutants that a Python mutator never reaches: each fence predicate made always
true, each `AND` conjunct dropped, `=`/`<`/`IS NULL` flipped, `IS 1` turned into `IS NOT 0`,
`ELSE 0` into `ELSE 1`. Each mutant is written into a private copy of the tree and only the
tests that pin that module run against it (`-x`, so a killed mutant stops at its first
failure). A mutant is killed when those tests fail or time out.

It writes `mutation/report.md`: per module, mutants, killed, survived, equivalent and the kill
rate of the non-equivalent ones, and every survivor with its line, its change and, when it is
known to be equivalent, why (`tools/mutation_equivalents.py`).

    python tools/mutate.py                       # every module below
    python tools/mutate.py memframe/service/fence.py --jobs 2
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import dataclasses
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from mutation_equivalents import EQUIVALENT, KILLED_SINCE  # noqa: E402

CORE_TESTS = ["tests/core"]
FENCE_TESTS = ["tests/assistant/test_fence_clauses.py", "tests/assistant/test_fence.py"]
#: module → the tests that pin it, fastest and most specific first
MODULES: dict[str, list[str]] = {
    "memframe/service/fence.py": FENCE_TESTS,
    "memframe/core/edits.py": ["tests/core/test_edit_promises.py", "tests/core/test_edits.py"],
    "memframe/core/namespace.py": ["tests/core/test_namespace_promises.py", "tests/core/test_namespace.py"],
    "memframe/core/recall.py": ["tests/core/test_recall.py", "tests/assistant/test_turn_promises.py"],
    "memframe/service/capture.py": [
        *FENCE_TESTS,
        "tests/assistant/test_turn_promises.py",
        "tests/assistant/test_turns.py",
    ],
    "memframe/service/policy.py": ["tests/test_service.py", *FENCE_TESTS, "tests/assistant/test_admission_recall.py"],
    "memframe/service/files.py": ["tests/test_service.py", "tests/test_backend_contract.py", *FENCE_TESTS],
    "memframe/core/types.py": [*CORE_TESTS, *FENCE_TESTS],
    "memframe/core/memory_state.py": ["tests/test_save_state.py", "tests/assistant/test_admission_recall.py"],
    "memframe/core/paths.py": CORE_TESTS,
    "memframe/core/turns.py": [*FENCE_TESTS, "tests/assistant/test_turns.py"],
    "memframe/service/admissions.py": [*FENCE_TESTS, "tests/assistant/test_admission_recall.py"],
    "memframe/backend/save_state.py": ["tests/test_send_wait_promise.py", "tests/test_save_state.py"],
}
SQL_MODULES = {"memframe/service/fence.py", "memframe/service/capture.py", "memframe/service/files.py",
               "memframe/service/policy.py"}  # fmt: skip
TIMEOUT = 240
RESULTS = ROOT / "mutation" / "results"


@dataclasses.dataclass(frozen=True)
class Mutant:
    module: str
    line: int
    kind: str
    before: str
    after: str
    start: int  # offsets into the module's source
    end: int

    @property
    def key(self) -> tuple[str, str, str, str]:
        """Stable across unrelated edits: no line number."""
        return (self.module, self.kind, self.before, self.after)


_FLIP = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE,
         ast.GtE: ast.Gt, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}  # fmt: skip
_SQL = [
    (re.compile(r" = "), " <> ", "sql: = → <>"),
    (re.compile(r" < "), " <= ", "sql: < → <="),
    (re.compile(r"\bIS NULL\b"), "IS NOT NULL", "sql: IS NULL → IS NOT NULL"),
    (re.compile(r"\bIS NOT NULL\b"), "IS NULL", "sql: IS NOT NULL → IS NULL"),
    (re.compile(r"\) IS 1\b"), ") IS NOT 0", "sql: IS 1 → IS NOT 0"),
    (re.compile(r"\bELSE 0\b"), "ELSE 1", "sql: ELSE 0 → ELSE 1"),
    (re.compile(r"\bTHEN 1\b"), "THEN 0", "sql: THEN 1 → THEN 0"),
]
_PREDICATE_FRAGMENT = re.compile(r" = | < |\bIS (NOT )?NULL\b")
_SQL_STATEMENT = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE)\b")
_SQL_HINT = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|WHERE|JOIN|AND|IS)\b| = | < ")


def _conjunct_length(text: str, at: int) -> int:
    """How far the conjunct starting at `at` runs: to the next AND, a closing bracket of its
    level, a quote, a new line or the next clause."""
    depth = 0
    for i in range(at, len(text)):
        ch = text[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                return i - at
            depth -= 1
        elif ch in "\"'\n" or (depth == 0 and re.match(r" (AND|THEN|WHERE|LEFT JOIN|ORDER|GROUP)\b", text[i:])):
            return i - at
    return len(text) - at


def _docstrings(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def mutants(module: str) -> list[Mutant]:
    source = (ROOT / module).read_text()
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(lineno: int, col: int) -> int:
        return starts[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode())

    found: list[Mutant] = []
    skip = _docstrings(tree)
    module_level = {id(n.value) for n in tree.body if isinstance(n, ast.Assign | ast.AnnAssign) and n.value}

    def add(node: ast.AST, replacement: str, kind: str) -> None:
        start = offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        before = source[start:end]
        if before != replacement:
            found.append(Mutant(module, node.lineno, kind, before, replacement, start, end))  # type: ignore[attr-defined]

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in _FLIP:
                    changed = ast.Compare(node.left, [*node.ops[:i], _FLIP[type(op)](), *node.ops[i + 1 :]],
                                          node.comparators)  # fmt: skip
                    add(node, ast.unparse(changed), f"compare: {type(op).__name__} → {_FLIP[type(op)].__name__}")
        elif isinstance(node, ast.BoolOp):
            other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            add(node, ast.unparse(ast.BoolOp(other, node.values)), "boolop: and ↔ or")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            add(node, ast.unparse(node.operand), "drop not")
        elif isinstance(node, ast.If | ast.While) and not isinstance(node.test, ast.UnaryOp | ast.Constant):
            add(node.test, f"not ({ast.unparse(node.test)})", "negate condition")
        elif isinstance(node, ast.Break):
            add(node, "continue", "break → continue")
        elif isinstance(node, ast.Continue):
            add(node, "break", "continue → break")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
            if not (isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)):
                other = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
                add(node, ast.unparse(ast.BinOp(node.left, other, node.right)), "arith: + ↔ -")
        elif isinstance(node, ast.Constant) and id(node) not in skip:
            value = node.value
            if isinstance(value, bool):
                add(node, repr(not value), "bool constant")
            elif isinstance(value, int | float) and not isinstance(value, bool):
                add(node, repr(value + 1), "number + 1")
                if id(node) in module_level:
                    add(node, repr(value - 1), "number - 1")
        if module in SQL_MODULES and isinstance(node, ast.Constant | ast.JoinedStr) and id(node) not in skip:
            if isinstance(node, ast.Constant) and not isinstance(node.value, str):
                continue
            start = offset(node.lineno, node.col_offset)
            end = offset(node.end_lineno, node.end_col_offset)
            text = source[start:end]
            if not _SQL_HINT.search(text):
                continue
            for pattern, new, kind in _SQL:
                for match in pattern.finditer(text):
                    a, b = start + match.start(), start + match.end()
                    found.append(Mutant(module, node.lineno, kind, source[a:b], new, a, b))
            if (
                isinstance(node, ast.Constant)
                and _PREDICATE_FRAGMENT.search(node.value)
                and not _SQL_STATEMENT.search(node.value)
            ):
                quote = text[0] if text[0] in "\"'" else '"'
                found.append(Mutant(module, node.lineno, "sql: predicate always true", text, f"{quote}1{quote}",
                                    start, end))  # fmt: skip
            for match in re.finditer(" AND ", text):
                length = _conjunct_length(text, match.end())
                if length:
                    a, b = start + match.start(), start + match.end() + length
                    found.append(Mutant(module, node.lineno, "sql: drop conjunct", source[a:b], "", a, b))
    return sorted(set(found), key=lambda m: (m.start, m.kind, m.after))


def _tree_copy(where: Path) -> Path:
    for name in ("memframe", "tests"):
        shutil.copytree(ROOT / name, where / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", where / "pyproject.toml")
    return where


def run_tests(tree: Path, tests: list[str]) -> bool:
    """True when the tests pass (the mutant survived)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:randomly", "-p", "no:cacheprovider",
           "--no-header", "-W", "ignore::pytest.PytestUnraisableExceptionWarning", *tests]  # fmt: skip
    try:
        done = subprocess.run(cmd, cwd=tree, capture_output=True, timeout=TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def check(tree: Path, mutant: Mutant) -> bool:
    """Apply one mutant in `tree`, run its module's tests, restore. True when it survived."""
    path = tree / mutant.module
    original = (ROOT / mutant.module).read_text()
    mutated = original[: mutant.start] + mutant.after + original[mutant.end :]
    try:
        compile(mutated, str(path), "exec")
    except SyntaxError:
        return False  # not a program: counts as killed, and is not reported
    path.write_text(mutated)
    try:
        return run_tests(tree, MODULES[mutant.module])
    finally:
        path.write_text(original)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", default=list(MODULES))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--report", default=str(ROOT / "mutation" / "report.md"))
    parser.add_argument("--resume", action="store_true", help="run only the mutants not yet measured")
    parser.add_argument("--report-only", action="store_true", help="rewrite the report from the saved results")
    args = parser.parse_args()
    if args.report_only:
        Path(args.report).write_text(report(*_all_results()))
        return 0
    with tempfile.TemporaryDirectory(prefix="memframe-mutate-") as tmp:
        trees = [_tree_copy(Path(tmp) / f"t{n}") for n in range(args.jobs)]
        for tree in trees:
            (tree / "t").mkdir()
        if not run_tests(trees[0], sorted({t for m in args.modules for t in MODULES[m]})):
            print("the unmutated tests fail; fix them first", file=sys.stderr)
            return 1
        free = list(trees)
        lock = threading.Lock()
        for module in args.modules:
            todo = mutants(module)
            began = time.monotonic()
            done: list[tuple[Mutant, bool]] = []
            if args.resume:  # keep what an earlier, cut-short run of this module measured
                earlier, minutes, _ = _all_results()
                done = [(m, s) for m, s in earlier.get(module, []) if m in set(todo)]
                began -= 60 * minutes.get(module, 0.0) if done else 0.0
            measured = {m for m, _ in done}
            total = len(todo)
            todo = [m for m in todo if m not in measured]
            print(f"{module}: {len(todo)} mutants", flush=True)

            def one(
                m: Mutant,
                module: str = module,
                total: int = total,
                done: list[tuple[Mutant, bool]] = done,
                began: float = began,
            ) -> None:
                with lock:
                    tree = free.pop()
                try:
                    survived = check(tree, m)
                finally:
                    with lock:
                        free.append(tree)
                with lock:
                    done.append((m, survived))
                    print(f"  {'SURVIVED' if survived else 'killed  '} {m.module}:{m.line} {m.kind}", flush=True)
                    _save(module, done, total, time.monotonic() - began, args.jobs)

            with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
                list(pool.map(one, todo))
            print(f"  survived {sum(s for _, s in done)} in {time.monotonic() - began:.0f} s", flush=True)
    Path(args.report).parent.mkdir(exist_ok=True)
    Path(args.report).write_text(report(*_all_results()))
    print(f"wrote {args.report}")
    return 0


def _save(module: str, done: list[tuple[Mutant, bool]], total: int, seconds: float, jobs: int) -> None:
    """After every mutant, so a run cut short still reports what it measured."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows = [{**dataclasses.asdict(m), "survived": s} for m, s in sorted(done, key=lambda r: r[0].start)]
    data = {"seconds": seconds, "jobs": jobs, "total": total, "mutants": rows}
    (RESULTS / (module.replace("/", ".") + ".json")).write_text(json.dumps(data, indent=1))


def _all_results() -> tuple[dict[str, list[tuple[Mutant, bool]]], dict[str, float], dict[str, int]]:
    """Every module's latest results and minutes (each run refreshes the modules it ran)."""
    out: dict[str, list[tuple[Mutant, bool]]] = {}
    minutes: dict[str, float] = {}
    totals: dict[str, int] = {}
    for module in MODULES:
        path = RESULTS / (module.replace("/", ".") + ".json")
        if path.is_file():
            data = json.loads(path.read_text())
            rows = data["mutants"]
            out[module] = [(Mutant(**{k: v for k, v in r.items() if k != "survived"}), r["survived"]) for r in rows]
            minutes[module] = data["seconds"] / 60
            totals[module] = data.get("total", len(rows))
    return out, minutes, totals


def report(results: dict[str, list[tuple[Mutant, bool]]], minutes: dict[str, float], totals: dict[str, int]) -> str:
    out = [
        "# Mutation report",
        "",
        "Made by `make mutate` (`tools/mutate.py`). A mutant is",
        "killed when the module's tests (`MODULES` in the script) fail or time out; an equivalent mutant",
        "changes no behaviour the contract speaks of (the reason is given) and is left out of the rate.",
        "",
        "| module | mutants run (of) | killed | survived | equivalent | kill rate (non-equivalent) | minutes |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    details: list[str] = []
    for module, rows in results.items():
        later = [m for m, s in rows if s and m.key in KILLED_SINCE]
        killed = sum(1 for _, s in rows if not s) + len(later)
        survivors = [m for m, s in rows if s and m.key not in KILLED_SINCE]
        for m in later:
            details.append(f"- `{module}:{m.line}` {m.kind}: survived the run; killed since by `{KILLED_SINCE[m.key]}`")
        equivalent = [m for m in survivors if m.key in EQUIVALENT]
        live = [m for m in survivors if m.key not in EQUIVALENT]
        judged = killed + len(live)
        rate = 100.0 * killed / judged if judged else 100.0
        out.append(
            f"| `{module}` | {len(rows)} (of {totals[module]}) | {killed} | {len(live)} | {len(equivalent)} "
            f"| {rate:.1f}% | {minutes[module]:.1f} |"
        )
        for m in survivors:
            why = EQUIVALENT.get(m.key)
            verdict = f"equivalent: {why}" if why else "**survived**"
            change = f"`{_one_line(m.before)}` → `{_one_line(m.after)}`"
            details.append(f"- `{module}:{m.line}` {m.kind}: {change} — {verdict}")
    partial = [f"`{m}` ({len(r)} of {totals[m]})" for m, r in results.items() if len(r) < totals[m]]
    never = [f"`{m}`" for m in MODULES if m not in results]
    if partial or never:
        out += ["", "Not measured completely: a run cut short measured only part of a module, whose rate is"]
        out += ["then the rate of the mutants it ran (the first ones by position in the file)."]
        out += [f"Partly run: {', '.join(partial) or 'none'}. Not run: {', '.join(never) or 'none'}."]
    out += ["", "## Surviving mutants", "", *(details or ["None."]), ""]
    return "\n".join(out)


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return (text[:90] + "…") if len(text) > 90 else text.replace("`", "'")


if __name__ == "__main__":
    raise SystemExit(main())
