"""`make mutate`: does the test suite kill what would break the contract?

A small mutation tester (no mutmut: see the README for why). For each module it makes
single-point mutants from the AST — comparisons flipped or loosened, `and`/`or` swapped,
`not` dropped, conditions negated, `break`/`continue` swapped, `+`/`-` swapped, numbers moved
by one (module-level constants both ways), `True`/`False` swapped — and, inside string
literals, SQL mutants that a Python mutator never reaches: each fence predicate made always
true, each `AND` conjunct dropped, `=`/`<`/`IS NULL` flipped, `IS 1` turned into `IS NOT 0`
(and `IS TRUE` into `IS NOT FALSE`), `ELSE 0` into `ELSE 1`, `THEN TRUE` into `THEN FALSE`.
Each mutant is written into a private copy of the tree and tests run against it (`-x`, so a
killed mutant stops at its first failure), through a fork server that has imported pytest's
third-party libraries once (`tools/mutate_server.py`). A mutant is killed when they fail or
time out.

Which tests: the ones that execute it. One run of every module's tests under coverage, with a
coverage context per test node id (`tools/mutate_pytest.py`), maps each line to the tests that
run it and times each test. A mutant inside a function then runs only the tests, among its
module's (`MODULES`), that execute its statement, fastest first; a mutant evaluated at import
(a module-level constant such as a SQL text, a class body, a default, a decorator) runs all of
its module's tests; a mutant on a line no test executes survives without running anything,
and the report says so.

`--resume` keeps an earlier result while the mutant's own code is unchanged (the same mutation
at the same place in the same text of its enclosing function or top-level statement) and
measures again the rest: new or changed code, and every earlier survivor not judged
equivalent (a test written since may kill it).

It writes `mutation/report.md`: per module, mutants, killed, survived, equivalent and the kill
rate of the non-equivalent ones, and every survivor with its line, its change and, when it is
known to be equivalent, why (`tools/mutation_equivalents.py`).

    python tools/mutate.py                       # every module below
    python tools/mutate.py memframe/service/fence.py --jobs 1
    python tools/mutate.py --resume              # only what changed, and the survivors
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import dataclasses
import functools
import hashlib
import json
import os
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
    "memframe/core/recall.py": [
        "tests/core/test_recall_promises.py",
        "tests/core/test_recall.py",
        "tests/assistant/test_turn_promises.py",
    ],
    "memframe/service/capture.py": [
        "tests/assistant/test_capture_promises.py",
        *FENCE_TESTS,
        "tests/assistant/test_turn_promises.py",
        "tests/assistant/test_turns.py",
    ],
    "memframe/service/proposals.py": ["tests/assistant/test_capture_promises.py", "tests/assistant/test_turns.py"],
    "memframe/service/policy.py": [
        "tests/test_policy_promises.py",
        "tests/test_service.py",
        *FENCE_TESTS,
        "tests/assistant/test_admission_recall.py",
    ],
    "memframe/service/files.py": [
        "tests/test_service.py",
        "tests/test_backend_contract.py",
        "tests/test_read_revisions.py",
        "tests/test_files_promises.py",
        "tests/test_delta_writes.py",  # keyframe runs and the compaction rewrite
        *FENCE_TESTS,
        "tests/assistant/test_capture_promises.py",
        "tests/test_policy_promises.py",
    ],
    "memframe/core/types.py": [
        *CORE_TESTS,
        "tests/test_document_promises.py",
        "tests/test_policy_promises.py",
        *FENCE_TESTS,
    ],
    "memframe/core/memory_state.py": ["tests/test_save_state.py", "tests/assistant/test_admission_recall.py"],
    "memframe/core/paths.py": CORE_TESTS,
    "memframe/core/turns.py": [
        *FENCE_TESTS,
        "tests/assistant/test_admission_promises.py",
        "tests/assistant/test_turns.py",
    ],
    "memframe/service/admissions.py": [
        "tests/assistant/test_admission_promises.py",
        *FENCE_TESTS,
        "tests/assistant/test_admission_recall.py",
        "tests/assistant/test_capture_promises.py",
        "tests/assistant/test_turns.py",
    ],
    "memframe/backend/save_state.py": [
        "tests/test_send_wait_promise.py",
        "tests/test_save_state_promises.py",
        "tests/test_save_state.py",
    ],
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
    first_line: int = 0  # the first line of the statement it sits in, through its last line:
    last_line: int = 0  # the lines whose tests it runs
    at_import: bool = False  # evaluated when the module is imported (then every test of the module)
    fingerprint: str = ""  # the mutation and the text of its enclosing function: unchanged code, same id

    @property
    def key(self) -> tuple[str, str, str, str]:
        """Stable across unrelated edits: no line number."""
        return (self.module, self.kind, self.before, self.after)


@dataclasses.dataclass(frozen=True)
class Result:
    survived: bool
    killed_by: str = ""  # the first failing test, or "timeout"
    tests: int = 0  # how many tests were selected for it
    seconds: float = 0.0
    unexecuted: bool = False  # survived because no test executes its line


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
    (re.compile(r"\) IS TRUE\b"), ") IS NOT FALSE", "sql: IS TRUE → IS NOT FALSE"),
    (re.compile(r"\bELSE FALSE\b"), "ELSE TRUE", "sql: ELSE FALSE → ELSE TRUE"),
    (re.compile(r"\bTHEN TRUE\b"), "THEN FALSE", "sql: THEN TRUE → THEN FALSE"),
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


def _frozen_flags(tree: ast.Module) -> set[int]:
    """`@dataclass(frozen=True)`'s flag: not mutated. Unfreezing changes behaviour only for code
    that assigns to a field (a bug no test of today's code can show) or hashes the record (then
    its tests fail anyway), and each such mutant ran every test of its module for nothing."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call):
                    ids.update(id(k.value) for k in decorator.keywords if k.arg == "frozen")
    return ids


def mutants(module: str, root: Path = ROOT) -> list[Mutant]:
    source = (root / module).read_text()
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(lineno: int, col: int) -> int:
        return starts[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode())

    parents: dict[int, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node

    def place(node: ast.AST) -> tuple[int, bool, str]:
        """The first line of the statement holding `node`, whether it is evaluated at import, and
        the source of its enclosing function (or top-level statement) with where `node` sits in it."""
        statement: ast.AST | None = node if isinstance(node, ast.stmt) else None
        at_import = True
        enclosing: ast.AST | None = None
        child, up = node, parents.get(id(node))
        while up is not None:
            if statement is None and isinstance(up, ast.stmt):
                statement = up
            if isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                body = up.body if isinstance(up.body, list) else [up.body]
                if any(child is b for b in body):
                    at_import = False
                    if enclosing is None and not isinstance(up, ast.Lambda):
                        enclosing = up
            top = isinstance(up, ast.stmt) and isinstance(parents.get(id(up)), ast.Module | ast.ClassDef)
            if enclosing is None and top and at_import:
                enclosing = up  # a top-level (or class-level) statement evaluated at import
            child, up = up, parents.get(id(up))
        enclosing = enclosing or statement or node
        seg_start = offset(enclosing.lineno, enclosing.col_offset)  # type: ignore[attr-defined]
        seg_end = offset(enclosing.end_lineno, enclosing.end_col_offset)  # type: ignore[attr-defined]
        first = statement.lineno if statement is not None else node.lineno  # type: ignore[attr-defined]
        return first, at_import, f"{seg_start}\0{source[seg_start:seg_end]}"

    found: list[Mutant] = []
    skip = _docstrings(tree) | _frozen_flags(tree)
    module_level = {id(n.value) for n in tree.body if isinstance(n, ast.Assign | ast.AnnAssign) and n.value}

    def make(node: ast.AST, kind: str, a: int, b: int, replacement: str) -> Mutant:
        first, at_import, segment = place(node)
        seg_start, text = segment.split("\0", 1)
        digest = hashlib.sha256(
            "\0".join([module, kind, source[a:b], replacement, str(a - int(seg_start)), text]).encode()
        ).hexdigest()[:16]
        return Mutant(module, node.lineno, kind, source[a:b], replacement, a, b,  # type: ignore[attr-defined]
                      first, node.end_lineno, at_import, digest)  # type: ignore[attr-defined]  # fmt: skip

    def add(node: ast.AST, replacement: str, kind: str) -> None:
        start = offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        if source[start:end] != replacement:
            found.append(make(node, kind, start, end, replacement))

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
                    found.append(make(node, kind, start + match.start(), start + match.end(), new))
            if (
                isinstance(node, ast.Constant)
                and _PREDICATE_FRAGMENT.search(node.value)
                and not _SQL_STATEMENT.search(node.value)
            ):
                quote = text[0] if text[0] in "\"'" else '"'
                found.append(make(node, "sql: predicate always true", start, end, f"{quote}1{quote}"))
            for match in re.finditer(" AND ", text):
                length = _conjunct_length(text, match.end())
                if length:
                    a, b = start + match.start(), start + match.end() + length
                    found.append(make(node, "sql: drop conjunct", a, b, ""))
    return sorted(set(found), key=lambda m: (m.start, m.kind, m.after))


def _tree_copy(where: Path) -> Path:
    for name in ("memframe", "tests"):
        shutil.copytree(ROOT / name, where / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", where / "pyproject.toml")
    return where


#: pytest as every run starts it: without the plugins these tests do not use (each one costs
#: start-up time, per mutant), no cache, no random order, and with the selection plugin
PYTEST = [
    *(sys.executable, "-m", "pytest", "-q", "--no-header", "-p", "mutate_pytest", "-p", "no:randomly"),
    *("-p", "no:cacheprovider", "-p", "no:schemathesis", "-p", "no:textual-snapshot", "-p", "no:syrupy"),
    *("-p", "no:anyio", "-p", "no:platformdirs", "-W", "ignore::pytest.PytestUnraisableExceptionWarning"),
    # the fork server has imported anyio (through httpx) before pytest could rewrite its asserts
    *("-W", "ignore::pytest.PytestAssertRewriteWarning"),
]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tools"), env.get("PYTHONPATH", "")]))
    env.update(extra)
    return env


@dataclasses.dataclass
class CoverageMap:
    """Which tests execute which line of each module, and how long each test took."""

    lines: dict[str, dict[int, set[str]]]
    seconds: dict[str, float]

    def tests_for(self, m: Mutant) -> list[str]:
        """The tests among its module's that execute the mutant, fastest first."""
        roots = MODULES[m.module]
        pool = [n for n in self.seconds if any(n.split("::")[0] == t or n.startswith(t + "/") for t in roots)]
        if not m.at_import:
            by_line = self.lines.get(m.module, {})
            hit: set[str] = set().union(*(by_line.get(n, set()) for n in range(m.first_line, m.last_line + 1)))
            if "" not in hit:  # "" is code run outside any test: then every test may depend on it
                pool = [n for n in pool if n in hit]
        return sorted(pool, key=lambda n: (self.seconds[n], n))


def coverage_map(tree: Path, modules: list[str]) -> CoverageMap:
    """Run the tests of `modules` once, unmutated, under coverage: the baseline, and the map."""
    out = tree / "t" / "coverage.json"
    tests = sorted({t for m in modules for t in MODULES[m]})
    # pytest given a folder and a file in it collects only the files named: name the folder alone
    tests = [t for t in tests if not any(t.startswith(folder + "/") for folder in tests)]
    env = _env(MUTATE_COVER=",".join(str(tree / m) for m in modules), MUTATE_MAP=str(out))
    done = subprocess.run([*PYTEST, *tests], cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not out.is_file():
        raise SystemExit("the unmutated tests fail; fix them first:\n" + "\n".join(done.stdout.splitlines()[-30:]))
    data = json.loads(out.read_text())
    lines = {
        Path(path).relative_to(tree).as_posix(): {int(n): set(ids) for n, ids in by_line.items()}
        for path, by_line in data["lines"].items()
    }
    return CoverageMap(lines, data["seconds"])


#: per tree, its fork server (tools/mutate_server.py), when mutants run through one
_SERVERS: dict[Path, subprocess.Popen[str]] = {}


def start_server(tree: Path) -> None:
    """A fork server for `tree`: pytest's third-party imports paid once instead of per mutant."""
    server = subprocess.Popen([sys.executable, str(ROOT / "tools" / "mutate_server.py"), str(tree)], cwd=tree,
                              env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert server.stdout is not None
    if json.loads(server.stdout.readline() or "{}").get("ready") is not True:
        raise SystemExit("the fork server did not start")
    _SERVERS[tree] = server


def _pytest(tree: Path, args: list[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Run pytest in `tree`: (exit code, -1 on a timeout; output)."""
    server = _SERVERS.get(tree)
    if server is None:
        try:
            done = subprocess.run([*PYTEST, *args], cwd=tree, env=_env(**env), capture_output=True, text=True,
                                  timeout=timeout, check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            return -1, ""
        return done.returncode, done.stdout
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(json.dumps({"args": [*PYTEST[3:], *args], "env": env, "timeout": timeout}) + "\n")
    server.stdin.flush()
    answer = json.loads(server.stdout.readline() or '{"rc": -2, "out": "the fork server died"}')
    return int(answer["rc"]), str(answer["out"])


def run_tests(tree: Path, tests: list[str], timeout: float) -> tuple[bool, str]:
    """Run `tests` in this order, stopping at the first failure: (passed, the failing test)."""
    listing = tree / "t" / "select.txt"
    listing.write_text("\n".join(tests) + "\n")
    files = sorted({n.split("::")[0] for n in tests})
    rc, out = _pytest(tree, ["-x", *files], {"MUTATE_SELECT": str(listing)}, timeout)
    if rc == -1:
        return False, "timeout"
    if rc == 0:
        return True, ""
    if rc == -2:
        raise SystemExit(out)
    for line in out.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return False, line.split(" ", 1)[1].split(" - ", 1)[0]
    return False, f"pytest exit {rc}"


def _forget_bytecode(path: Path) -> None:
    """A mutant often has the original's size and mtime second, which is all a .pyc is checked by."""
    for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        cached.unlink(missing_ok=True)


def check(tree: Path, mutant: Mutant, cov: CoverageMap) -> Result:
    """Apply one mutant in `tree`, run the tests that execute it, restore."""
    path = tree / mutant.module
    original = path.read_text()
    mutated = original[: mutant.start] + mutant.after + original[mutant.end :]
    try:
        compile(mutated, str(path), "exec")
    except SyntaxError:
        return Result(False, "not a program")  # counts as killed, and is not reported
    tests = cov.tests_for(mutant)
    if not tests:
        return Result(True, unexecuted=True)
    timeout = min(TIMEOUT, 60 + 3 * sum(cov.seconds[n] for n in tests))
    began = time.monotonic()
    path.write_text(mutated)
    _forget_bytecode(path)
    try:
        survived, killed_by = run_tests(tree, tests, timeout)
    finally:
        path.write_text(original)
        _forget_bytecode(path)
    return Result(survived, killed_by, len(tests), round(time.monotonic() - began, 2))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", default=list(MODULES))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--report", default=str(ROOT / "mutation" / "report.md"))
    parser.add_argument(
        "--resume", action="store_true", help="measure only new or changed mutants and earlier survivors"
    )
    parser.add_argument("--report-only", action="store_true", help="rewrite the report from the saved results")
    parser.add_argument("--no-fork", action="store_true", help="a fresh interpreter per mutant (slower)")
    args = parser.parse_args()
    if args.report_only:
        Path(args.report).write_text(report(*_all_results()))
        return 0
    with tempfile.TemporaryDirectory(prefix="memframe-mutate-") as tmp:
        trees = [_tree_copy(Path(tmp) / f"t{n}") for n in range(args.jobs)]
        for tree in trees:
            (tree / "t").mkdir()
        began = time.monotonic()
        cov = coverage_map(trees[0], args.modules)
        print(f"baseline and coverage: {len(cov.seconds)} tests in {time.monotonic() - began:.0f} s", flush=True)
        for tree in trees if not args.no_fork else []:
            start_server(tree)
        try:
            _run_modules(args, trees, cov)
        finally:
            for server in _SERVERS.values():
                server.stdin.close()  # type: ignore[union-attr]
                server.wait()
        print(f"all done in {time.monotonic() - began:.0f} s", flush=True)
    Path(args.report).parent.mkdir(exist_ok=True)
    Path(args.report).write_text(report(*_all_results()))
    print(f"wrote {args.report}")
    return 0


def _run_modules(args: argparse.Namespace, trees: list[Path], cov: CoverageMap) -> None:
    """Every module's mutants, each saved as soon as it is measured."""
    saved = _all_results()[0] if args.resume else {}
    free = list(trees)
    lock = threading.Lock()
    for module in args.modules:
        todo = mutants(module, trees[0])
        done: list[tuple[Mutant, Result]] = []
        earlier = {m.fingerprint: r for m, r in saved.get(module, []) if m.fingerprint}
        for m in todo:  # with --resume: keep what unchanged code measured, except live survivors
            r = earlier.get(m.fingerprint)
            if r is not None and not (r.survived and entry_for(EQUIVALENT, m) is None):
                done.append((m, r))
        kept = {m for m, _ in done}
        total = len(todo)
        todo = [m for m in todo if m not in kept]
        print(f"{module}: {len(todo)} mutants to run ({len(kept)} kept)", flush=True)
        module_began = time.monotonic()

        def one(m: Mutant, module: str = module, total: int = total, done: list = done) -> None:  # type: ignore[type-arg]
            with lock:
                tree = free.pop()
            try:
                result = check(tree, m, cov)
            finally:
                with lock:
                    free.append(tree)
            with lock:
                done.append((m, result))
                verdict = "SURVIVED" if result.survived else "killed  "
                how = f"{result.tests} tests, {result.seconds:.1f} s"
                how = "no test executes it" if result.unexecuted else how
                print(f"  {verdict} {m.module}:{m.line} {m.kind} ({how}) {result.killed_by}", flush=True)
                _save(module, done, total, args.jobs)

        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(one, todo))
        if not todo:
            _save(module, done, total, args.jobs)
        seconds = time.monotonic() - module_began
        print(f"  survived {sum(r.survived for _, r in done)}; {len(todo)} run in {seconds:.0f} s", flush=True)


_MUTANT_FIELDS = {f.name for f in dataclasses.fields(Mutant)}
_RESULT_FIELDS = {f.name for f in dataclasses.fields(Result)}


def _save(module: str, done: list[tuple[Mutant, Result]], total: int, jobs: int) -> None:
    """After every mutant, so a run cut short still reports what it measured."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows = [{**dataclasses.asdict(m), **dataclasses.asdict(r)} for m, r in sorted(done, key=lambda d: d[0].start)]
    seconds = sum(r.seconds for _, r in done)
    data = {"seconds": round(seconds, 1), "jobs": jobs, "total": total, "mutants": rows}
    (RESULTS / (module.replace("/", ".") + ".json")).write_text(json.dumps(data, indent=1, ensure_ascii=False))


def _all_results() -> tuple[dict[str, list[tuple[Mutant, Result]]], dict[str, float], dict[str, int]]:
    """Every module's latest results, minutes spent running its mutants, and mutant count."""
    out: dict[str, list[tuple[Mutant, Result]]] = {}
    minutes: dict[str, float] = {}
    totals: dict[str, int] = {}
    for module in MODULES:
        path = RESULTS / (module.replace("/", ".") + ".json")
        if path.is_file():
            data = json.loads(path.read_text())
            rows = data["mutants"]
            out[module] = [
                (
                    Mutant(**{k: v for k, v in r.items() if k in _MUTANT_FIELDS}),
                    Result(**{k: v for k, v in r.items() if k in _RESULT_FIELDS}),
                )
                for r in rows
            ]
            minutes[module] = data["seconds"] / 60
            totals[module] = data.get("total", len(rows))
    return out, minutes, totals


@functools.cache
def _source(module: str) -> str:
    path = ROOT / module
    return path.read_text() if path.is_file() else ""


def entry_for(table: dict[tuple[str, ...], str], m: Mutant) -> str | None:
    """The entry for `m` in EQUIVALENT or KILLED_SINCE: keyed by (module, kind, before, after),
    or, where that alone is ambiguous, with a fifth element that the mutant's line must contain —
    as written, or with the mutated text marked ⟨so⟩ when one line has several such mutants."""
    source = _source(m.module)
    begin, end = source.rfind("\n", 0, m.start) + 1, source.find("\n", m.end)
    line = source[begin : end if end >= 0 else len(source)]
    marked = source[begin : m.start] + "⟨" + source[m.start : m.end] + "⟩" + source[m.end : end if end >= 0 else None]
    for key, value in table.items():
        if len(key) == 5 and key[:4] == m.key and (key[4] in line or key[4] in marked):
            return value
    return table.get(m.key)


def report(results: dict[str, list[tuple[Mutant, Result]]], minutes: dict[str, float], totals: dict[str, int]) -> str:
    out = [
        "# Mutation report",
        "",
        "Made by `make mutate` (`tools/mutate.py`). A mutant is killed when the tests of its module",
        "(`MODULES` in the script) that execute it fail or time out; the tests that execute it are",
        "found by one coverage run per test (a mutant evaluated at import runs all of its module's",
        "tests; one on a line no test executes survives unrun). An equivalent mutant changes no",
        "behaviour the contract speaks of (the reason is given) and is left out of the rate.",
        "",
        "| module | mutants run (of) | killed | survived | equivalent | kill rate (non-equivalent) "
        "| minutes | s per mutant |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    details: list[str] = []
    for module, rows in results.items():
        later = [m for m, r in rows if r.survived and entry_for(KILLED_SINCE, m)]
        killed = sum(1 for _, r in rows if not r.survived) + len(later)
        survivors = [(m, r) for m, r in rows if r.survived and not entry_for(KILLED_SINCE, m)]
        for m in later:
            details.append(
                f"- `{module}:{m.line}` {m.kind}: survived the run; killed since by `{entry_for(KILLED_SINCE, m)}`"
            )
        equivalent = [m for m, _ in survivors if entry_for(EQUIVALENT, m)]
        live = [m for m, _ in survivors if not entry_for(EQUIVALENT, m)]
        judged = killed + len(live)
        rate = 100.0 * killed / judged if judged else 100.0
        per = 60 * minutes[module] / len(rows) if rows else 0.0
        out.append(
            f"| `{module}` | {len(rows)} (of {totals[module]}) | {killed} | {len(live)} | {len(equivalent)} "
            f"| {rate:.1f}% | {minutes[module]:.1f} | {per:.1f} |"
        )
        for m, r in survivors:
            why = entry_for(EQUIVALENT, m)
            verdict = f"equivalent: {why}" if why else "**survived**"
            if r.unexecuted:
                verdict += " (no test executes it)"
            change = f"`{_one_line(m.before)}` → `{_one_line(m.after)}`"
            details.append(f"- `{module}:{m.line}` {m.kind}: {change} — {verdict}")
    partial = [f"`{m}` ({len(r)} of {totals[m]})" for m, r in results.items() if len(r) < totals[m]]
    never = [f"`{m}`" for m in MODULES if m not in results]
    if partial or never:
        out += ["", "Not measured completely: a run cut short measured only part of a module, whose rate is"]
        out += ["then the rate of the mutants it ran (the first ones by position in the file)."]
        out += [f"Partly run: {', '.join(partial) or 'none'}. Not run: {', '.join(never) or 'none'}."]
    older = [f"`{m}`" for m, rows in results.items() if rows and not any(mu.fingerprint for mu, _ in rows)]
    if older:
        out += ["", f"Measured by an earlier version of this script, on older code: {', '.join(older)} (their"]
        out += ["results carry no fingerprint, so the next `--resume` measures them whole)."]
    out += ["", "## Surviving mutants", "", *(details or ["None."]), ""]
    return "\n".join(out)


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return (text[:90] + "…") if len(text) > 90 else text.replace("`", "'")


if __name__ == "__main__":
    raise SystemExit(main())
