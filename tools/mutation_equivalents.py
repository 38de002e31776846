"""Surviving mutants judged equivalent: they change no behaviour the contract speaks of.

Keyed by (module, kind, before, after) — the mutant without its line number, so an unrelated
edit does not lose the judgement. Each reason says why no test can (or should) tell.
"""

from __future__ import annotations

_NS = "memframe/core/namespace.py"
_FENCE = "memframe/service/fence.py"

EQUIVALENT: dict[tuple[str, str, str, str], str] = {
    (_NS, "number + 1", "8", "9"): (
        "_MAX_DECODE_ROUNDS: a path still changing after the last round is reserved (fails closed), so "
        "one round more or less only moves where an absurdly nested ordinary path starts being refused"
    ),
    (_NS, "number - 1", "8", "7"): (
        "_MAX_DECODE_ROUNDS: as for 9; fewer rounds refuse more, never less (unsettled means reserved)"
    ),
    (_NS, "number + 1", "4", "5"): (
        "the fold loop settles in one or two rounds and breaks when stable; a fifth round never runs"
    ),
    (_NS, "break → continue", "break", "continue"): (
        "the fold loop breaks once the text is stable; continuing folds the same text again to the same "
        "result (more work, same answer)"
    ),
    (_FENCE, "bool constant", "True", "False"): (
        "zip(..., strict=True) over the predicates and the diagnostic row, which always have the same "
        "length: strictness never fires"
    ),
}
