"""A small Wing–Gong linearizability checker (with Lowe's memoisation), and memframe's sequential model.

A history is a list of completed operations, each with the time it was invoked
and the time its response came back. It is linearizable when some order of the
operations (1) respects real time — an operation that returned before another
was invoked comes first — and (2) replayed through the sequential model, gives
every operation exactly the response it really got. The search tries, at each
point, every pending operation that may come next, and remembers (set of done
operations, model state) pairs it has already refuted, so histories of a few
hundred operations from up to 8 clients are checked in well under a second.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from memframe.core.types import Mode


@dataclass(frozen=True)
class Op:
    client: int
    kind: str
    args: tuple[Any, ...]
    result: tuple[Any, ...]
    invoked: int  # time.perf_counter_ns() just before the call
    returned: int  # … and just after it returned or raised


Step = Callable[[Any, Op], Any]  # the next state, or None if `op.result` is impossible here


def linearize(ops: Sequence[Op], initial: Hashable, step: Step) -> list[int] | None:
    """An order of `ops` (indices) that explains every response, or None if there is none."""
    n = len(ops)
    by_invocation = sorted(range(n), key=lambda i: ops[i].invoked)
    full = (1 << n) - 1
    refuted: set[tuple[int, Hashable]] = set()
    path: list[int] = []

    def search(done: int, state: Hashable) -> bool:
        if done == full:
            return True
        if (done, state) in refuted:
            return False
        pending = [i for i in by_invocation if not done >> i & 1]
        horizon = min(ops[i].returned for i in pending)
        for i in pending:
            if ops[i].invoked > horizon:
                break  # some pending operation returned before this one began: it must go first
            nxt = step(state, ops[i])
            if nxt is None:
                continue
            path.append(i)
            if search(done | 1 << i, nxt):
                return True
            path.pop()
        refuted.add((done, state))
        return False

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * n + 100))
    try:
        return list(path) if search(0, initial) else None
    finally:
        sys.setrecursionlimit(limit)


# --- memframe's sequential model ----------------------------------------------------------------


@dataclass(frozen=True)
class State:
    """Everything the concurrent operations can observe, as one hashable value."""

    version: int = 0
    generation: int = 0
    mode: Mode = Mode.READ_ONLY
    revision: int = 0
    slots: tuple[tuple[str, str], ...] = ()  # conversation -> the admission holding its credential
    consumed: frozenset[str] = frozenset()
    revoked: frozenset[str] = frozenset()  # key sessions with a durable revocation row

    def slot(self, conversation: str) -> str | None:
        return dict(self.slots).get(conversation)


def fence_holds(
    s: State, admission: str, conversation: str, a_mode: Mode, a_revision: int, a_generation: int, session: str
) -> bool:
    """The fence predicate over the model (AI consent, expiry and membership do not change in these runs)."""
    return (
        session not in s.revoked
        and admission not in s.consumed
        and a_mode is Mode.AUTO
        and s.mode is Mode.AUTO
        and s.revision == a_revision
        and s.generation == a_generation
        and s.slot(conversation) == admission
    )


def memframe_step(s: State, op: Op) -> State | None:
    """One operation applied at its linearization point; None if its response contradicts the model.

    Operations and responses:

        ("save"|"clear", base)                        -> ("ok", version) | ("conflict", current)
        ("mode", mode, expected_revision)             -> ("ok", mode, revision) | ("conflict", current_revision)
        ("admit", conversation[, key_session])        -> ("ok", admission, mode, revision, generation)
                                                         | ("no key session",)
        ("capture", admission, conversation, mode, revision, generation, key_session, expected_version)
                                  -> ("ok", version) | ("conflict", current) | ("fenced",) | ("no key session",)
        ("revoke", key_session)                       -> ("ok",) | ("not found",)

    A capture resolves its key session in RAM before its batch, and a revocation forgets the key
    only after its durable row: so "no key session" is a possible answer exactly when the
    revocation row precedes the capture. Ingress checks the session the same way before it writes
    (issue 21), so the same holds for an admission, which then writes nothing.
    """
    kind, args, result = op.kind, op.args, op.result
    if kind in ("save", "clear"):
        (base,) = args
        if base != s.version:
            return s if result == ("conflict", s.version) else None
        if result != ("ok", s.version + 1):
            return None
        return State(
            s.version + 1, s.generation + (kind == "clear"), s.mode, s.revision, s.slots, s.consumed, s.revoked
        )
    if kind == "mode":
        mode, expected = args
        if expected != s.revision:
            return s if result == ("conflict", s.revision) else None
        new_mode, new_revision = (mode, s.revision + 1) if mode is not s.mode else (s.mode, s.revision)
        if result != ("ok", new_mode, new_revision):
            return None
        return State(s.version, s.generation, new_mode, new_revision, s.slots, s.consumed, s.revoked)
    if kind == "admit":
        conversation, session = (*args, None)[:2]
        if result == ("no key session",):  # a send naming a revoked key session admits nothing
            return s if session in s.revoked else None
        if session is not None and session in s.revoked:
            return None
        status, admission, mode, revision, generation = result
        if (status, mode, revision, generation) != ("ok", s.mode, s.revision, s.generation):
            return None
        slots = tuple(sorted({**dict(s.slots), conversation: admission}.items()))
        return State(s.version, s.generation, s.mode, s.revision, slots, s.consumed, s.revoked)
    if kind == "capture":
        admission, conversation, a_mode, a_revision, a_generation, session, expected = args
        if result == ("no key session",):
            return s if session in s.revoked else None
        if expected != s.version:
            return s if result == ("conflict", s.version) else None
        if not fence_holds(s, admission, conversation, a_mode, a_revision, a_generation, session):
            return s if result == ("fenced",) else None
        if result != ("ok", s.version + 1):
            return None
        return State(s.version + 1, s.generation, s.mode, s.revision, s.slots, s.consumed | {admission}, s.revoked)
    if kind == "revoke":
        (session,) = args
        if result == ("not found",):  # a second revocation may find the key already forgotten
            return s if session in s.revoked else None
        if result != ("ok",):
            return None
        return State(s.version, s.generation, s.mode, s.revision, s.slots, s.consumed, s.revoked | {session})
    raise ValueError(f"unknown operation {kind!r}")


def replay(ops: Sequence[Op], order: Sequence[int], initial: State) -> State:
    state = initial
    for i in order:
        nxt = memframe_step(state, ops[i])
        assert nxt is not None
        state = nxt
    return state
