"""Surviving mutants judged equivalent: they change no behaviour the contract speaks of.

Keyed by (module, kind, before, after) — the mutant without its line number, so an unrelated
edit does not lose the judgement — or, where one module has several such mutants and only some
are equivalent, by (module, kind, before, after, text the mutant's line contains), in which the
mutated text may be marked ⟨so⟩ to tell apart several on one line. Each reason
says why no test can (or should) tell.
"""

from __future__ import annotations

_NS = "memframe/core/namespace.py"
_RECALL = "memframe/core/recall.py"
_EDITS = "memframe/core/edits.py"
_FENCE = "memframe/service/fence.py"
_CAPTURE = "memframe/service/capture.py"
_POLICY = "memframe/service/policy.py"
_FILES = "memframe/service/files.py"
_TURNS = "memframe/core/turns.py"

EQUIVALENT: dict[tuple[str, ...], str] = {
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
    (_NS, "number + 1", "1", "2"): (
        "split(':', 1)[0] and split('\\x00', 1)[0]: the text before the first separator is the same "
        "whatever the split limit"
    ),
    (_EDITS, "bool constant", "True", "False"): (
        "@dataclass(frozen=True) on MemoryChange: nothing assigns to an edit, so freezing guards "
        "against a future bug but changes no behaviour today"
    ),
    (_RECALL, "number + 1", "16", "17"): (
        "_MAX_DECODE_ROUNDS in recall: text still changing after the last round is defanged whole "
        "(fails closed), so one round more or less only moves where absurd nesting loses every bracket"
    ),
    (_RECALL, "number - 1", "16", "15"): "as for 17: fewer rounds defang more, never less",
    (_RECALL, "number + 1", "4096", "4097"): "the size of a cache of folded characters: speed only",
    (_EDITS, "compare: Gt → GtE", "last > start", "last >= start"): (
        "the walk back over trailing blank lines stops at the heading either way: a heading line is "
        "never blank, so `last >= start` stops on it too"
    ),
    (_FENCE, "bool constant", "True", "False"): (
        "zip(..., strict=True) over the predicates and the diagnostic row, which always have the same "
        "length: strictness never fires"
    ),
    (_CAPTURE, "sql: drop conjunct", " AND consumed_at IS NULL", ""): (
        "marking the admission consumed: the fence row inserted just before, in the same transaction, "
        "already required `a.consumed_at IS NULL` (a second capture of the turn is refused there, F9), "
        "so the UPDATE's own guard never finds a consumed row"
    ),
    (_CAPTURE, "number + 1", "8", "9", "token_hex(8)"): (
        "a proposal id's random part one byte longer: ids stay unique and opaque; nothing reads their length"
    ),
    (_CAPTURE, "bool constant", "False", "True", "ensure_ascii=False"): (
        "a proposal's edits as JSON with non-ASCII escaped: sealed, and read back by json.loads to the same edits"
    ),
    (_CAPTURE, "bool constant", "True", "False", "ensure_ascii=False, sort_keys=True"): (
        "a proposal's edits as JSON without sorted keys: sealed, and read back by json.loads to the same edits"
    ),
    (_CAPTURE, "bool constant", "True", "False", '"expected": expected_version}, sort_keys=True'): (
        "the request hash without sorted keys: the body is built from the same dict literal and "
        "MemoryChange.as_dict in a fixed order every time, so a retry of the same change still hashes the "
        "same and a different change still differently"
    ),
    (_POLICY, "sql: drop conjunct", " AND path = :path", ""): (
        "the Clear's own row is looked up by workspace, version and operation 'clear'; only the memory can "
        "be cleared (put_file refuses clear=True on any other path), so a 'clear' row at that version is "
        "the memory's whatever the path condition says"
    ),
    (_FILES, "number + 1", "500", "501", "wanted[start : start + 500]"): (
        "get_versions reads in steps of 500 and slices 501: neighbouring chunks overlap by one revision, "
        "which lands in the same dict; 501 bound parameters are still far under SQLite's limit"
    ),
    (_FILES, "number + 1", "8", "9", "_info(row[:⟨8⟩])"): (
        "`_info(row[:8])` → `row[:9]`: _info reads the first eight columns by index, so a longer slice "
        "reads the same (the two `row[8]` mutants on that line are killed)"
    ),
    (_TURNS, "bool constant", "False", "True", "cut_off: bool = False"): (
        "TurnResult.cut_off's default: the runtime sets it from every final reply's finish_reason; the "
        "default is seen only by a turn that ended without a final reply (stopped after its tool steps, or "
        "the model lost after tools ran), where the frame and CLI would say the answer was cut off. A "
        "wording of the memframe CLI, no promise of the contract"
    ),
    (_RECALL, "number + 1", "0", "1", "return decoded, done > 0"): (
        "`done` is where the last decoded entity ended; an entity is at least two characters (`&` and a "
        "name or number), so whenever one was decoded `done > 1` holds exactly when `done > 0` does"
    ),
    (_RECALL, "compare: In → NotIn", "ch in text", "ch not in text", "_LT_OR_AMP - _BRACKETS"): (
        "neutralize's second early return is a shortcut only: a text it lets through is read in full, and "
        "one with no marker in even the most lenient reading is returned unchanged all the same"
    ),
    (_EDITS, "number + 1", "0", "1", "opener.group(1)[0] == fence[0]"): (
        "_FENCE matches a run of one character repeated (`{3,} or ~{3,}), so a fence's second character "
        "is its first: comparing [1] instead of [0], on either side, compares the same characters"
    ),
    (_FILES, "arith: + ↔ -", "version - 1", "version + 1"): (
        "keyframe_runs: where the run read on a miss starts is speed only: it always ends at the version "
        "asked, so any start at or below it answers the same; starting at the keyframe makes one read enough"
    ),
    (_FILES, "number + 1", "1", "2", "(version - 1) % sealing.KEYFRAME_EVERY"): (
        "keyframe_runs: as for `version + 1`, a run starting one later still ends at the version asked"
    ),
    (_RECALL, "break → continue", "break", "continue"): (
        "the only `break` in recall.py, on a reading that has not settled: continuing re-reads the same, "
        "unchanged text to the same unsettled answer, and the loop ends in the same `_defang_everything`"
    ),
}


#: Survivors of a run that a test added afterwards kills, checked by applying the mutant by hand
#: and running that test; the next full run measures them again.
_READS = "tests/test_files_promises.py and tests/test_read_revisions.py (now in files' MODULES)"
_SELECT = 'f"SELECT {_INFO_COLUMNS}, ciphertext FROM file_versions WHERE workspace_id = ? AND path = ?"'
_SELECT_CHUNK = _SELECT + "\n            f\" AND version IN ({', '.join('?' * len(chunk))})\""
_PLAIN_NAMES = (
    "tests/core/test_namespace.py::"
    "test_decomposed_accents_pass_where_combining_marks_are_allowed_and_plain_names_always"
)

_HEAD_BESIDE_A_DOCUMENT = (
    "tests/test_delta_writes.py::test_compaction_never_rewrites_the_memorys_head_beside_a_document_with_more_versions"
)

KILLED_SINCE: dict[tuple[str, ...], str] = {
    (_FILES, "sql: drop conjunct", " AND f.path = v.path", ""): _HEAD_BESIDE_A_DOCUMENT,
    (_FILES, "compare: GtE → Gt", "len(ciphertext) >= len(old)", "len(ciphertext) > len(old)"): _HEAD_BESIDE_A_DOCUMENT,
    (
        _NS,
        "bool constant",
        "True",
        "False",
        "combining_marks: bool = True",
    ): "tests/core/test_namespace.py::test_a_lookalike_path_is_refused_naming_the_character",
    (
        _NS,
        "negate condition",
        "is_bidi_control(ch)",
        "not (is_bidi_control(ch))",
    ): _PLAIN_NAMES,
    (
        _NS,
        "negate condition",
        "is_default_ignorable(ch)",
        "not (is_default_ignorable(ch))",
    ): _PLAIN_NAMES,
    (
        _NS,
        "boolop: and ↔ or",
        "combining_marks and is_combining_mark(ch)",
        "combining_marks or is_combining_mark(ch)",
    ): (_PLAIN_NAMES),
    (
        _NS,
        "negate condition",
        "combining_marks and is_combining_mark(ch)",
        "not (combining_marks and is_combining_mark(ch))",
    ): (_PLAIN_NAMES),
    (_RECALL, "compare: Is → IsNot", "status is RecallStatus.PROVIDED", "status is not RecallStatus.PROVIDED"): (
        "tests/core/test_recall_promises.py::test_R9_each_calls_receipt_says_provided_withheld_and_why_or_nothing_added"
    ),
    (_RECALL, "negate condition", "status is RecallStatus.PROVIDED", "not (status is RecallStatus.PROVIDED)"): (
        "tests/core/test_recall_promises.py::test_R9_each_calls_receipt_says_provided_withheld_and_why_or_nothing_added"
    ),
    (_RECALL, "negate condition", "status.withheld", "not (status.withheld)"): (
        "tests/core/test_recall_promises.py::test_R9_each_calls_receipt_says_provided_withheld_and_why_or_nothing_added"
    ),
    (_FILES, "arith: + ↔ -", "start + 500", "start - 500"): _READS,
    (_FILES, "compare: Is → IsNot", "row[8] is None", "row[8] is not None"): _READS,
    (_FILES, "number + 1", "8", "9", "row[⟨8⟩] is None"): _READS,
    (_FILES, "number + 1", "8", "9", "bytes(row[⟨8⟩])"): _READS,
    (_FILES, "compare: NotIn → In", "v not in found", "v in found"): _READS,
    (_FILES, "negate condition", "missing", "not (missing)"): _READS,
    (_FILES, "number + 1", "0", "1", "range(⟨0⟩, len(wanted), 500)"): _READS,
    (_FILES, "number + 1", "500", "501", "range(0, len(wanted), ⟨500⟩)"): _READS,
    (_FILES, "number + 1", "0", "1", "found[int(row[⟨0⟩])]"): _READS,
    (_FILES, "number + 1", "0", "1", "{missing[⟨0⟩]}"): _READS,
    (_FILES, "sql: = → <>", " = ", " <> ", _SELECT): _READS,
    (_FILES, "sql: drop conjunct", " AND path = ?", "", _SELECT): _READS,
    (
        _FILES,
        "sql: predicate always true",
        _SELECT_CHUNK,
        '"1"',
    ): _READS,
    (_RECALL, "compare: In → NotIn", 'ch in "[\\ufe47\\uff3b"', "ch not in '[\ufe47\uff3b'"): (
        "tests/core/test_recall_promises.py::test_R6_text_nested_too_deep_to_read_keeps_no_bracket_and_no_entity_start"
    ),
    (_RECALL, "negate condition", 'ch in "[\\ufe47\\uff3b"', "not (ch in '[\ufe47\uff3b')"): (
        "tests/core/test_recall_promises.py::test_R6_text_nested_too_deep_to_read_keeps_no_bracket_and_no_entity_start"
    ),
    (_EDITS, "number + 1", "1", "2"): (  # `end = start + 1` in _Document.add
        "tests/core/test_edit_promises.py::test_T1_a_heading_right_after_the_target_heading_ends_its_empty_section"
    ),
    (_EDITS, "compare: IsNot → Is", "value is not None", "value is None"): (
        "tests/core/test_edit_promises.py::test_T1_an_edit_reads_back_as_the_same_edit"
    ),
    (_NS, "continue → break", "continue", "break"): (
        "tests/core/test_namespace_promises.py::test_Z1_every_spelling_of_the_namespace_is_reserved"
        " [windows-empty-then-dotdot]"
    ),
    (_NS, "bool constant", "False", "True"): (
        "tests/core/test_namespace_promises.py::test_Z1_every_spelling_of_the_namespace_is_reserved"
        " [three-dots-kept-literally-then-dotdot]"
    ),
}
