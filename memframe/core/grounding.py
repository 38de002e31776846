"""Which automatic edits the person's own words support, and which lines no capture may write.

A small model asked to remember often stores what it was shown rather than what it was told: a
fragment of JSON, a number, the recall block's own attributes. Two rules judge a capture's lines
before anything is written; both are pure and deterministic, so a person can predict them.

**Frame residue** (always on): a line, heading or replacement carrying the recall block's
markers (any spelling `neutralize` would defang, `<workspace-memory` included), an admission id
(`adm_` and 24 hex digits) or a boundary value (32 hex digits standing alone, or `boundary=`)
is refused. Such a line can only have come from the frame around memory, never from the person.

**Grounding** (opt-in, for small models): an added line, or a replacing line, is *supported* by
the person's message of the turn when every one of its content words appears in that message,
and it has at least one. Words are read the same way on both sides:

1. NFKC-normalised and case-folded (so `Ｍiso`, `MISO` and `miso` are one word);
2. split into runs of letters and digits; everything else (punctuation, Markdown, spaces) separates;
3. a run is cut where the script changes; a piece in a script written without spaces between
   words (Han, Hiragana, Katakana, Hangul, Thai, …) cannot be split further, so it is supported
   when it occurs anywhere in the message's normalised text (`猫はミソ` is 猫, は, ミソ);
4. one-letter words and the stop words below (function words, and the words a model uses for
   the person: "user", "person", "they") are not content words; digits always are, and so are
   negations ("not", "never", "no"), so a number or a "not" cannot be invented.

There is no stemming and no synonym: "cats" does not support "cat". A capture the rule does not
support is not lost; it becomes a proposal the person applies or dismisses.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memframe.core.edits import MemoryChange, RefusalReason
from memframe.core.errors import EditRefused
from memframe.core.recall import neutralize

__all__ = [
    "STOP_WORDS",
    "Unsupported",
    "content_words",
    "frame_residue",
    "refuse_frame_residue",
    "supports",
    "unsupported_lines",
    "words",
]

#: Words that carry no fact of their own. Kept short on purpose: every word here is one a model may
#: add freely, so a negation, a number or a name never belongs here.
_STOP_WORD_LINES = (
    "a an the this that these those",
    "i me my mine myself we us our ours you your yours he him his she her hers it its they them their theirs",
    "user users person people",
    "is am are was were be been being has have had having do does did",
    "will would shall should can could may might",
    "of to in on at by for from with about as into onto over under than then so also too very just",
    "and or but if because while",
    "s d ll m re t ve",  # what an apostrophe leaves: user's, they'd, I'll, I'm, they're, don't, I've
)
STOP_WORDS = frozenset(" ".join(_STOP_WORD_LINES).split())

_WORD = re.compile(r"[^\W_]+")
_ADMISSION_ID = re.compile(r"adm_[0-9a-f]{24}", re.IGNORECASE)
_BOUNDARY_VALUE = re.compile(r"(?<![0-9a-z])[0-9a-f]{32}(?![0-9a-z])|boundary\s*=", re.IGNORECASE)
#: Scripts written without spaces between words: a run of them cannot be split into words here.
_UNSPACED_SCRIPTS = ("CJK", "HIRAGANA", "KATAKANA", "HANGUL", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN")


def _normal(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def words(text: str) -> list[str]:
    """The runs of letters and digits of `text`, NFKC-normalised and case-folded, cut where a
    script written without spaces starts or ends (rule 3)."""
    pieces: list[str] = []
    for run in _WORD.findall(_normal(text)):
        if run.isascii():
            pieces.append(run)
            continue
        start = 0
        for i in range(1, len(run)):
            if _script(run[i]) != _script(run[i - 1]):
                pieces.append(run[start:i])
                start = i
        pieces.append(run[start:])
    return pieces


def _script(ch: str) -> str:
    """The script an unspaced character is written in (`CJK`, `HIRAGANA`, …), else "" for any other."""
    name = unicodedata.name(ch, "").split(" ")[0].split("-")[0]
    return name if name in _UNSPACED_SCRIPTS else ""


def _unspaced(word: str) -> bool:
    return _script(word[0]) != ""


def content_words(text: str) -> list[str]:
    """The words of `text` that must each be found in the person's message (rule 4)."""
    return [w for w in words(text) if w not in STOP_WORDS and (len(w) > 1 or w.isdigit() or _unspaced(w))]


def supports(message: str, line: str) -> bool:
    """Whether the person's `message` supports `line`: every content word found, and at least one."""
    wanted = content_words(line)
    if not wanted:
        return False
    said = set(words(message))
    normal = _normal(message)
    return all(w in said or (_unspaced(w) and w in normal) for w in wanted)


@dataclass(frozen=True)
class Unsupported:
    """One line a capture would write that the rule does not support, with its edit's 1-based index."""

    index: int
    line: str


def _written(changes: Sequence[MemoryChange]) -> Iterable[tuple[int, str]]:
    """(index, line) of each line a capture would put into memory: an add's line, a replace's new line."""
    for index, change in enumerate(changes, start=1):
        if change.op == "add":
            yield index, change.line
        elif change.op == "replace" and change.new_line is not None:
            yield index, change.new_line


def unsupported_lines(message: str, changes: Sequence[MemoryChange]) -> list[Unsupported]:
    """The lines of `changes` that `message` does not support; [] when the capture is grounded.

    A removal writes no line, so it is never judged here (the fence and the mode still are).
    """
    return [Unsupported(i, line) for i, line in _written(changes) if not supports(message, line)]


def frame_residue(changes: Sequence[MemoryChange]) -> int | None:
    """The 1-based index of the first edit that would write the recall frame's residue, or None.

    What an edit writes is read (an add's line and heading, a replace's new line); the line a
    replace or a remove targets is already in memory, and removing it is how residue leaves.
    """
    for index, change in enumerate(changes, start=1):
        written = (change.line, change.heading) if change.op == "add" else (change.new_line,)
        if any(text is not None and _carries_residue(text) for text in written):
            return index
    return None


def refuse_frame_residue(changes: Sequence[MemoryChange]) -> None:
    """`EditRefused` (reason `frame_residue`) when an edit would write the recall frame's residue."""
    if (index := frame_residue(changes)) is not None:
        raise EditRefused(
            f"Edit {index}: the line carries the recall block's markers, an admission id or a boundary value, "
            "which come from the frame around memory, never from the person.",
            reason=RefusalReason.FRAME_RESIDUE,
            index=index,
        )


def _carries_residue(text: str) -> bool:
    """Markers in any spelling a lenient reader takes for them, an admission id, a boundary value."""
    return neutralize(text) != text or bool(_ADMISSION_ID.search(text) or _BOUNDARY_VALUE.search(text))
