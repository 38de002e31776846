"""Is a path inside the reserved memory namespace, however it is spelled?

The contract fences `.zudotext/memory/` from every automatic writer except the
one memory route, so an Assistant or MCP client must not reach it through a
spelling some later layer would resolve there: other case, `./`, empty or
`..` segments, backslashes, percent-encoding (once or more), Unicode
compatibility forms, zero-width characters, or Windows' trailing dots and
spaces.

No single normal form is right for every layer (a file store may decode
percent signs, or fold case, or resolve `..` before or after either), so
`is_reserved` answers True when *any* of several interpretations lands in the
namespace: every percent-decoding depth, `..` resolved both before and after
folding, and the text before a NUL. Being generous here only refuses odd
automatic writes; being stingy would let one through.

`..` above the root is clamped (as URL resolution does) when deciding
reservation, and rejected by `validate_document_path` for a stored name.

Invisible characters (default-ignorable code points, bidi controls, combining
marks) are seen through when deciding reservation, so `.zudotext/memory\u034f/`
is the namespace. A path an automation route or MCP client writes may not
contain them at all (`validate_written_path`): such a name looks like another
one. People's routes refuse bidi controls and default-ignorables in a new path
(`refuse_lookalike`); existing odd paths stay readable everywhere.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from urllib.parse import unquote

from memframe.core.errors import InvalidInput, NamespaceReserved
from memframe.core.invisible import is_bidi_control, is_combining_mark, is_default_ignorable, is_invisible
from memframe.core.types import MEMORY_NAMESPACE

__all__ = ["is_reserved", "normalize_path", "refuse_lookalike", "validate_document_path", "validate_written_path"]

#: The namespace as folded segments: (".zudotext", "memory").
_RESERVED: tuple[str, ...] = tuple(s for s in MEMORY_NAMESPACE.split("/") if s)
#: Percent-decoding is repeated until stable; deeper nesting than this fails closed.
_MAX_DECODE_ROUNDS = 8
_SEPARATORS = re.compile(r"[/\\]")
_RESERVED_MESSAGE = "The memory namespace .zudotext/memory/ is reserved; only the memory route writes there."


def _strip_format(text: str) -> str:
    return "".join(ch for ch in text if not is_invisible(ch))


def _fold(text: str) -> str:
    """Collapse the spellings a file system or a reader treats as the same name."""
    text = _strip_format(text)
    for _ in range(4):  # casefold can leave text that NFKC changes again; settles in one or two
        folded = _strip_format(unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold()))
        if folded == text:
            break
        text = folded
    return text


def _decoding_stages(path: str) -> tuple[list[str], bool]:
    """The path as read after 0, 1, 2 … rounds of folding and percent-decoding.

    Folding comes before each decode so that fullwidth `％２Ｅ` decodes too.
    The flag is False when the text was still changing after the last round.
    """
    stages = [path]
    current = path
    for _ in range(_MAX_DECODE_ROUNDS):
        following = unquote(_fold(current), errors="replace")
        if following == current:
            return stages, True
        stages.append(following)
        current = following
    return stages, False


def _windows_segment(segment: str) -> str:
    """Windows ignores trailing dots and spaces, and `name:stream` names `name`."""
    return segment.split(":", 1)[0].strip().rstrip(". ").strip()


def _resolve(segments: list[str], *, windows: bool) -> list[str]:
    """Resolve `.` and `..` and drop empty segments; `..` at the root stays at the root."""
    resolved: list[str] = []
    for raw in segments:
        segment = raw.strip() if windows else raw
        if segment in ("", "."):
            continue
        if segment == "..":
            if resolved:
                resolved.pop()
            continue
        if windows:
            segment = _windows_segment(segment)
            if not segment:
                continue
        resolved.append(segment)
    return resolved


def _lands_in_namespace(segments: list[str]) -> bool:
    cleaned = [s for s in (_windows_segment(s) for s in segments) if s]
    return tuple(cleaned[: len(_RESERVED)]) == _RESERVED


def _interpretations(path: str) -> Iterator[list[str]]:
    stages, _ = _decoding_stages(path)
    for stage in stages:
        variants = [stage]
        if "\x00" in stage:  # a C layer would stop reading here
            variants.append(stage.split("\x00", 1)[0])
        for text in variants:
            # Fold first, then resolve: `．．` and `%2e%2e` act as `..`.
            yield _resolve(_SEPARATORS.split(_fold(text)), windows=True)
            # Resolve first, then fold each segment: what a store keeps literally.
            literal = _resolve(_SEPARATORS.split(text), windows=False)
            yield _SEPARATORS.split("/".join(_fold(s) for s in literal))


def normalize_path(path: str) -> str:
    """The comparison key of a path: fully decoded, folded and resolved.

    It is for comparing and showing, never for storing: case and Unicode form
    are folded away. `is_reserved` looks at more readings than this one key.
    """
    stages, _ = _decoding_stages(path)
    return "/".join(_resolve(_SEPARATORS.split(_fold(stages[-1])), windows=True))


def is_reserved(path: str) -> bool:
    """True when any reasonable reading of `path` is the memory namespace or inside it."""
    _, settled = _decoding_stages(path)
    if not settled:
        return True  # nested deeper than any honest client encodes: refuse rather than guess
    return any(_lands_in_namespace(segments) for segments in _interpretations(path))


def _has_control(text: str) -> bool:
    return any(unicodedata.category(ch) == "Cc" for ch in text)


def validate_document_path(path: str) -> str:
    """The stored name of an ordinary document an automation route may touch.

    The name keeps its case and characters (only separators, `.`, `..` and
    empty segments are resolved), so a person's file stays addressable by the
    name they gave it. Every spelling of the namespace is refused with
    MEMORY_NAMESPACE_RESERVED before anything else is judged, so the caller
    gets the contract's error for it even when the path is odd in other ways.
    """
    if not isinstance(path, str) or not path.strip():
        raise InvalidInput("The document path is empty.")
    if is_reserved(path):
        raise NamespaceReserved(_RESERVED_MESSAGE)
    if _has_control(path):
        raise InvalidInput("The document path contains control characters.")
    resolved: list[str] = []
    for segment in _SEPARATORS.split(path):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not resolved:
                raise InvalidInput("The document path climbs above the workspace root.")
            resolved.pop()
            continue
        resolved.append(segment)
    if not resolved:
        raise InvalidInput("The document path names the workspace root, not a document.")
    stored = "/".join(resolved)
    if is_reserved(stored):  # cannot happen by construction; kept as the last line of the fence
        raise NamespaceReserved(_RESERVED_MESSAGE)
    return stored


def refuse_lookalike(path: str, *, combining_marks: bool = True) -> None:
    """Refuse a path holding characters that make it look like another name.

    Bidi controls and default-ignorable code points always; combining marks too
    unless `combining_marks` is False (people may write decomposed accents).
    """
    for ch in path:
        if is_bidi_control(ch):
            what = "a bidi control character"
        elif is_default_ignorable(ch):
            what = "an invisible character"
        elif combining_marks and is_combining_mark(ch):
            what = "a combining mark"
        else:
            continue
        raise InvalidInput(
            f"The path contains {what} (U+{ord(ch):04X}), so it would look like another name; use a visible name."
        )


def validate_written_path(path: str) -> str:
    """`validate_document_path` for a path an automation route or MCP client writes: no lookalikes."""
    stored = validate_document_path(path)
    refuse_lookalike(path)
    return stored
