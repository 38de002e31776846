"""The exact edits `remember_in_memory` may make to the memory document.

A model never rewrites memory; it asks for at most five one-line edits, and
each must say exactly which line it means. `replace` and `remove` must match
one whole line exactly once, so a stale or ambiguous target fails instead of
rewriting unrelated prose, and an `add` that is already present changes
nothing. Either every edit applies or none does. The rules and their refusals are one subject,
which is why this module runs past 400 lines.

Refusals are `EditRefused` with `details["reason"]` (and `details["index"]`,
1-based, when one edit is at fault). Messages say what to do next and never
quote memory text.

Headings are ATX headings (`#` … `######`) outside fenced code blocks;
setext (underlined) headings are not recognised.
"""

from __future__ import annotations

import enum
import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from memframe.core.errors import EditRefused
from memframe.core.types import MEMORY_RECALL_MAX_BYTES, utf8_size

__all__ = [
    "MAX_EDITS",
    "MAX_LINE_BYTES",
    "TARGET_GONE",
    "MemoryChange",
    "RefusalReason",
    "apply_memory_changes",
    "parse_changes",
]

MAX_EDITS = 5
MAX_LINE_BYTES = 500

Op = Literal["add", "replace", "remove"]
_OPS: tuple[Op, ...] = ("add", "replace", "remove")
_FIELDS: dict[str, tuple[str, ...]] = {
    "add": ("op", "line", "heading"),
    "replace": ("op", "line", "new_line"),
    "remove": ("op", "line"),
}


class RefusalReason(enum.StrEnum):
    """Why an edit was refused: `EditRefused.details["reason"]`, matched by clients."""

    AMBIGUOUS = "ambiguous"
    AMBIGUOUS_HEADING = "ambiguous_heading"
    BLANK = "blank"
    FRAME_RESIDUE = "frame_residue"
    INVALID_FIELD = "invalid_field"
    INVALID_HEADING = "invalid_heading"
    INVALID_JSON = "invalid_json"
    INVALID_SHAPE = "invalid_shape"
    INVISIBLE_CHARACTERS = "invisible_characters"
    LINE_TOO_LONG = "line_too_long"
    MEMORY_OVERSIZED = "memory_oversized"
    MISSING_FIELD = "missing_field"
    MULTILINE = "multiline"
    NO_EDITS = "no_edits"
    NO_MATCH = "no_match"
    OVERSIZED = "oversized"
    TOO_MANY = "too_many"
    UNEXPECTED_FIELD = "unexpected_field"
    UNKNOWN_OP = "unknown_op"


#: The refusals that mean "the line this edit targets changed since it was made", not a bad edit.
TARGET_GONE = frozenset({RefusalReason.NO_MATCH, RefusalReason.AMBIGUOUS, RefusalReason.AMBIGUOUS_HEADING})

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+$")
_HEADING_ARG = re.compile(r"^(#*)\s*(.*)$", re.DOTALL)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class MemoryChange:
    """One requested edit; `line` is the line to add, or the exact line to target."""

    op: Op
    line: str
    new_line: str | None = None
    heading: str | None = None

    def as_dict(self) -> dict[str, str]:
        """The tool-call shape `parse_changes` reads back; unset fields are left out."""
        fields = {"op": self.op, "line": self.line, "new_line": self.new_line, "heading": self.heading}
        return {key: value for key, value in fields.items() if value is not None}


def _refuse(index: int | None, reason: RefusalReason, message: str) -> EditRefused:
    where = f"Edit {index}: " if index is not None else ""
    details: dict[str, Any] = {"reason": reason}
    if index is not None:
        details["index"] = index
    return EditRefused(where + message, **details)


# --- validating one field -------------------------------------------------------------------


def _check_text(index: int, field: str, value: object) -> str:
    """One line a person can see whole: no breaks, no hidden or reordering characters."""
    if not isinstance(value, str):
        raise _refuse(index, RefusalReason.INVALID_FIELD, f"'{field}' must be a string.")
    if "\n" in value or "\r" in value or "\u2028" in value or "\u2029" in value:
        raise _refuse(index, RefusalReason.MULTILINE, f"'{field}' must be a single line; split it into separate edits.")
    if not value.strip():
        raise _refuse(index, RefusalReason.BLANK, f"'{field}' is empty; give the text of one line.")
    for ch in value:
        category = unicodedata.category(ch)
        if category in ("Cc", "Cf", "Cs", "Co"):
            raise _refuse(
                index,
                RefusalReason.INVISIBLE_CHARACTERS,
                f"'{field}' contains the invisible or control character U+{ord(ch):04X}; "
                "remove it and use plain visible text.",
            )
    size = utf8_size(value)
    if size > MAX_LINE_BYTES:
        raise _refuse(
            index,
            RefusalReason.LINE_TOO_LONG,
            f"'{field}' is {size} bytes; each line may be at most {MAX_LINE_BYTES} UTF-8 bytes. Shorten it.",
        )
    return value


def _check_change(index: int, change: MemoryChange) -> None:
    if change.op not in _OPS:
        raise _refuse(index, RefusalReason.UNKNOWN_OP, "'op' must be one of add, replace or remove.")
    _check_text(index, "line", change.line)
    if change.op == "replace":
        if change.new_line is None:
            raise _refuse(index, RefusalReason.MISSING_FIELD, "a replace needs 'new_line', the line to put in.")
        _check_text(index, "new_line", change.new_line)
    elif change.new_line is not None:
        raise _refuse(index, RefusalReason.UNEXPECTED_FIELD, "only a replace takes 'new_line'.")
    if change.op == "add":
        if change.heading is not None:
            _check_text(index, "heading", change.heading)
            _parse_heading(index, change.heading)
    elif change.heading is not None:
        raise _refuse(index, RefusalReason.UNEXPECTED_FIELD, "only an add takes 'heading'.")


def _check_count(count: int) -> None:
    if count == 0:
        raise _refuse(None, RefusalReason.NO_EDITS, f"No edits were given; give between 1 and {MAX_EDITS}.")
    if count > MAX_EDITS:
        raise _refuse(
            None,
            RefusalReason.TOO_MANY,
            f"{count} edits were given; at most {MAX_EDITS} are allowed in one call.",
        )


def parse_changes(raw: Any) -> list[MemoryChange]:
    """Turn a model's tool arguments into checked edits, or say precisely what to fix.

    Accepts a list of edit objects, `{"edits": [...]}`, or either as a JSON
    string (tool arguments often arrive serialised). Unknown keys are refused
    rather than ignored, so a misspelt `heading` cannot silently drop the
    heading; a null value counts as absent.
    """
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise _refuse(None, RefusalReason.INVALID_JSON, "The edits are not valid JSON.") from None
    if isinstance(raw, dict):
        if set(raw) != {"edits"}:
            raise _refuse(None, RefusalReason.INVALID_SHAPE, 'Give the edits as {"edits": [...]} with no other keys.')
        raw = raw["edits"]
    if not isinstance(raw, list):
        raise _refuse(None, RefusalReason.INVALID_SHAPE, "The edits must be a list of edit objects.")
    _check_count(len(raw))
    changes: list[MemoryChange] = []
    for index, item in enumerate(raw, start=1):
        if not isinstance(item, dict):
            raise _refuse(index, RefusalReason.INVALID_SHAPE, "each edit must be an object with 'op' and 'line'.")
        op = item.get("op")
        if op not in _OPS:
            raise _refuse(index, RefusalReason.UNKNOWN_OP, "'op' must be one of add, replace or remove.")
        op = cast(Op, op)
        # A null for a field this op does not take is accepted: strict JSON-schema tool
        # calling sends every property, using null for the ones that do not apply.
        unknown = sorted(str(k) for k, v in item.items() if k not in _FIELDS[op] and v is not None)
        if unknown:
            allowed = ", ".join(_FIELDS[op])
            raise _refuse(
                index,
                RefusalReason.UNEXPECTED_FIELD,
                f"a {op} does not take {', '.join(unknown)}; its fields are {allowed}.",
            )
        if "line" not in item:
            raise _refuse(index, RefusalReason.MISSING_FIELD, "'line' is required.")
        change = MemoryChange(
            op=op,
            line=item["line"],
            new_line=item.get("new_line"),
            heading=item.get("heading"),
        )
        _check_change(index, change)
        changes.append(change)
    return changes


# --- the document as lines ------------------------------------------------------------------


def _bare(line: str) -> str:
    """A line as compared: a CRLF document's trailing `\\r` does not count."""
    return line[:-1] if line.endswith("\r") else line


def _parse_heading(index: int, heading: str) -> tuple[int | None, str]:
    """(level, title) of a requested heading; level None when it was given without `#`.

    `##Prefs`, `##  Prefs ##` and `## Prefs` are the same heading; a bare
    `Prefs` matches a heading of that title at any level and is created as
    `## Prefs`.
    """
    match = _HEADING_ARG.match(heading.strip())
    assert match is not None  # the pattern matches every string
    hashes, title = match.group(1), _CLOSING_HASHES.sub("", match.group(2)).strip()
    if len(hashes) > 6:
        raise _refuse(index, RefusalReason.INVALID_HEADING, "'heading' may have at most six '#' marks.")
    if not title:
        raise _refuse(index, RefusalReason.BLANK, "'heading' has no title after its '#' marks.")
    return (len(hashes) or None), title


def _heading_key(line: str) -> tuple[int, str]:
    """(level, title) of an ATX heading line, or (0, "") for any other line."""
    match = _HEADING.match(_bare(line))
    if match is None:
        return 0, ""
    title = _CLOSING_HASHES.sub("", match.group(2) or "").strip()
    return len(match.group(1)), title


def _heading_levels(lines: list[str]) -> tuple[list[int], int]:
    """Each line's heading level (0 for body text and anything in a fenced code block), and
    where a fence that is never closed opens (`len(lines)` when every fence closes): such a
    fence runs to the end of the document, so nothing added to a section may land inside it."""
    levels: list[int] = []
    fence: str | None = None
    opened = len(lines)
    for at, line in enumerate(lines):
        bare = _bare(line)
        opener = _FENCE.match(bare)
        if fence is not None:
            if opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence):
                fence = None
            levels.append(0)
        elif opener:
            fence, opened = opener.group(1), at
            levels.append(0)
        else:
            levels.append(_heading_key(line)[0])
    return levels, (len(lines) if fence is None else opened)


class _Document:
    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")
        self.ends_with_newline = text.endswith("\n")
        if self.ends_with_newline or text == "":
            self.lines.pop()
        first_break = text.find("\n")
        self.eol_cr = first_break > 0 and text[first_break - 1] == "\r"

    def text(self) -> str:
        body = "\n".join(self.lines)
        return body + "\n" if self.lines and self.ends_with_newline else body

    def _new(self, line: str) -> str:
        return line + "\r" if self.eol_cr else line

    def matches(self, line: str) -> list[int]:
        """Where `_bare(existing) == line`, found with list.count/index (a validated line never
        holds "\r"): the capture path runs this for every edit, so no Python loop over the lines."""
        found: list[int] = []
        for form in (line, line + "\r"):
            at = -1
            for _ in range(self.lines.count(form)):
                at = self.lines.index(form, at + 1)
                found.append(at)
        return sorted(found)

    def single_match(self, index: int, change: MemoryChange) -> int:
        found = self.matches(change.line)
        if not found:
            raise _refuse(
                index,
                RefusalReason.NO_MATCH,
                f"the {change.op} target matches no line in memory. Copy one whole line "
                "exactly as it appears now, including any '- ' or '#' markers.",
            )
        if len(found) > 1:
            raise _refuse(
                index,
                RefusalReason.AMBIGUOUS,
                f"the {change.op} target matches {len(found)} lines in memory; it must match "
                "exactly one. Target a line that appears only once.",
            )
        return found[0]

    def append(self, lines: list[str]) -> None:
        self.lines.extend(self._new(line) for line in lines)
        self.ends_with_newline = True

    def add(self, index: int, change: MemoryChange) -> None:
        if self.matches(change.line):
            return  # already remembered: an add is idempotent
        if change.heading is None:
            self.append([change.line])
            return
        level, title = _parse_heading(index, change.heading)
        levels, unclosed_fence = _heading_levels(self.lines)
        found = [
            i
            for i, found_level in enumerate(levels)
            if found_level and level in (None, found_level) and _heading_key(self.lines[i])[1] == title
        ]
        if len(found) > 1:
            raise _refuse(
                index,
                RefusalReason.AMBIGUOUS_HEADING,
                f"the heading matches {len(found)} headings in memory; name one that appears "
                "once (with its '#' level if the title repeats at other levels), or add the line "
                "without a heading.",
            )
        if not found:
            blank = [""] if self.lines and _bare(self.lines[-1]).strip() else []
            self.append([*blank, f"{'#' * (level or 2)} {title}", change.line])
            return
        start = found[0]
        end = start + 1
        while end < unclosed_fence and not (0 < levels[end] <= levels[start]):
            end += 1
        last = end - 1
        while last > start and not _bare(self.lines[last]).strip():
            last -= 1
        self.lines.insert(last + 1, self._new(change.line))
        if last + 1 == len(self.lines) - 1:
            self.ends_with_newline = True

    def replace(self, index: int, change: MemoryChange) -> None:
        at = self.single_match(index, change)
        assert change.new_line is not None
        cr = "\r" if self.lines[at].endswith("\r") else ""
        self.lines[at] = change.new_line + cr

    def remove(self, index: int, change: MemoryChange) -> None:
        at = self.single_match(index, change)
        del self.lines[at]
        if at == len(self.lines) and self.lines:
            self.ends_with_newline = True  # the line before keeps the break it already had


def apply_memory_changes(text: str, changes: Sequence[MemoryChange]) -> str:
    """Apply the edits in order to a copy, or raise without applying any.

    Text already over the recall bound is refused before anything is tried:
    the contract keeps a person's long text intact and refuses automatic
    capture until they shorten it.
    """
    size = utf8_size(text)
    if size > MEMORY_RECALL_MAX_BYTES:
        raise _refuse(
            None,
            RefusalReason.MEMORY_OVERSIZED,
            f"Memory is {size} bytes, over the {MEMORY_RECALL_MAX_BYTES}-byte limit; a person "
            "must shorten it before the Assistant can change it.",
        )
    _check_count(len(changes))
    for index, change in enumerate(changes, start=1):
        _check_change(index, change)
    document = _Document(text)
    for index, change in enumerate(changes, start=1):
        if change.op == "add":
            document.add(index, change)
        elif change.op == "replace":
            document.replace(index, change)
        else:
            document.remove(index, change)
    result = document.text()
    size = utf8_size(result)
    if size > MEMORY_RECALL_MAX_BYTES:
        raise _refuse(
            None,
            RefusalReason.OVERSIZED,
            f"These edits would make memory {size} bytes, over the {MEMORY_RECALL_MAX_BYTES}-byte "
            "limit. Nothing was changed; remove or shorten lines instead.",
        )
    return result
