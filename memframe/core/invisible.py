"""Characters a reader does not see: default-ignorable code points, bidi controls, combining marks.

They are how hostile text makes two different strings look the same — a forged
recall marker that looks exactly like the real closer, or a path that looks
exactly like the memory document. The recall frame and the path rules both ask
these questions, so they are answered once, here.

`unicodedata` has no Default_Ignorable_Code_Point property, so the ranges below
are Unicode's (DerivedCoreProperties.txt, stable since 5.2; the property is
closed for new assignments outside these ranges).
"""

from __future__ import annotations

import unicodedata

__all__ = ["is_bidi_control", "is_combining_mark", "is_default_ignorable", "is_invisible"]

_DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x061C, 0x061C),  # arabic letter mark
    (0x115F, 0x1160),  # hangul choseong / jungseong fillers
    (0x17B4, 0x17B5),  # khmer inherent vowels
    (0x180B, 0x180F),  # mongolian free variation selectors, vowel separator
    (0x200B, 0x200F),  # zero-width space, joiners, marks
    (0x202A, 0x202E),  # bidi embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, bidi isolates, deprecated formats
    (0x3164, 0x3164),  # hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFEFF, 0xFEFF),  # zero-width no-break space
    (0xFFA0, 0xFFA0),  # halfwidth hangul filler
    (0xFFF0, 0xFFF8),  # unassigned specials
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol formats
    (0xE0000, 0xE0FFF),  # tags and variation selectors supplement
)
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def is_default_ignorable(ch: str) -> bool:
    """True for a code point renderers show as nothing when they do not support it."""
    code = ord(ch)
    return any(low <= code <= high for low, high in _DEFAULT_IGNORABLE)


def is_bidi_control(ch: str) -> bool:
    """True for a character that reorders how the text around it is displayed."""
    return ch in _BIDI_CONTROLS


def is_combining_mark(ch: str) -> bool:
    """True for a mark drawn onto the character before it (general category M)."""
    return unicodedata.category(ch).startswith("M")


def is_invisible(ch: str) -> bool:
    """Default-ignorable, a format character (Cf), or a combining mark: nothing a reader can tell apart."""
    return is_default_ignorable(ch) or is_combining_mark(ch) or unicodedata.category(ch) == "Cf"
