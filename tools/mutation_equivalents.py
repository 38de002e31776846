"""Surviving mutants judged equivalent: they change no behaviour the contract speaks of.

Keyed by (module, kind, before, after) — the mutant without its line number, so an unrelated
edit does not lose the judgement. Each reason says why no test can (or should) tell.
"""

from __future__ import annotations

EQUIVALENT: dict[tuple[str, str, str, str], str] = {}
