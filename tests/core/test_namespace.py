"""Every spelling of .zudotext/memory/ is reserved; ordinary paths are not."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memframe.core.errors import InvalidInput, NamespaceReserved
from memframe.core.namespace import is_reserved, normalize_path, validate_document_path
from memframe.core.types import MEMORY_NAMESPACE, MEMORY_PATH

RESERVED_SPELLINGS = [
    MEMORY_PATH,
    MEMORY_NAMESPACE,
    ".zudotext/memory",
    ".zudotext/memory/",
    ".zudotext/memory/notes/deep/file.md",
    # case
    ".ZUDOTEXT/MEMORY/MEMORY.md",
    ".ZudoText/Memory/x.md",
    # leading ./ and /
    "./.zudotext/memory/MEMORY.md",
    "/.zudotext/memory/MEMORY.md",
    "././/./.zudotext/memory/x",
    "//.zudotext//memory//x",
    # . and .. segments
    ".zudotext/./memory/x",
    "notes/../.zudotext/memory/x",
    "a/b/../../.zudotext/memory",
    ".zudotext/x/../memory/y",
    "../.zudotext/memory/x",
    "../../../.zudotext/memory/x",
    ".zudotext/memory/sub/..",
    # backslashes
    ".zudotext\\memory\\MEMORY.md",
    "\\.zudotext\\memory",
    ".\\.zudotext/memory\\x",
    "notes\\..\\.zudotext\\memory\\x",
    # percent-encoding once or twice
    "%2ezudotext/memory/x",
    "%2Ezudotext%2Fmemory%2Fx",
    ".zudotext%2fmemory",
    "%2e%7Audotext/memory/x",
    "%252ezudotext/memory/x",
    ".zudotext%252Fmemory%252Fx",
    "%25252ezudotext/memory",
    "notes/%2e%2e/.zudotext/memory/x",
    "notes/%252e%252e/.zudotext/memory/x",
    "%2E%5A%55%44%4F%54%45%58%54/%4D%45%4D%4F%52%59",
    "%EF%BC%8Ezudotext/memory",  # UTF-8 of a fullwidth full stop
    # Unicode compatibility forms
    "．ｚｕｄｏｔｅｘｔ/ｍｅｍｏｒｙ/x",
    "．ＺＵＤＯＴＥＸＴ／ＭＥＭＯＲＹ",
    ".zudotext／memory",
    ".zudotext＼memory",
    "％２ｅzudotext/memory",
    "notes/．．/.zudotext/memory",
    ".zudotext/\u217fem\u2134ry",  # ROMAN NUMERAL ONE THOUSAND and SCRIPT SMALL O
    "\uff0ezudotext/memory",
    # zero-width and other format characters
    ".zudo\u200btext/memory/x",
    "\ufeff.zudotext/memory",
    ".zudotext/mem\u200dory",
    ".zudotext\u2060/memory",
    ".zudo\u00adtext/memory",
    ".zudotext/memory%E2%80%8B/x",
    # Windows trailing dots and spaces, stream names
    ".zudotext./memory /x",
    ".zudotext. . /memory.../x",
    ".zudotext /memory/",
    " .zudotext/memory",
    ".zudotext/memory::$INDEX_ALLOCATION/x",
    ".zudotext/memory:hidden",
    # a NUL a C layer would stop at
    ".zudotext/memory\x00.md",
    # readings that disagree: stored literally inside, decoded outside
    ".zudotext/memory/%2e%2e/%2e%2e/x",
    ".zudotext/memory/．．/x",
    # several at once
    "./NOTES/..\\%2E%5Audotext.//%252F%4demory /x",
    "／．ｚｕｄｏ\u200bＴＥＸＴ．／／ｍｅｍｏｒｙ　／x",
]

ORDINARY_PATHS = [
    "notes.md",
    "notes/today.md",
    ".zudotext",
    ".zudotext/",
    ".zudotext/other.md",
    ".zudotext/memoryfoo.md",
    ".zudotext/memories/x.md",
    ".zudotext/memory-old/x.md",
    ".zudotext/memory.md",
    ".zudotext/memorx/x",
    ".zudotext/settings/memory/x",
    "zudotext/memory/x",
    "..zudotext/memory/x",
    "_zudotext/memory/x",
    ".zudotextx/memory/x",
    "memory/.zudotext/x",
    "notes/.zudotext/memory/x",
    "a/.zudotext/memory",
    ".zudotext/../memory/x",
    ".zudotext/memory/../../notes.md",
    "%2e%2e/notes.md",
    "100% sure.md",
    "a%20b.md",
    "日本語/メモ.md",
    "Ｎｏｔｅｓ/ｍｅｍｏｒｙ.md",
    "notes/memory",
    ".zudotext/\u043cemory",  # Cyrillic em: a different name on every file system
]


@pytest.mark.parametrize("path", RESERVED_SPELLINGS)
def test_reserved_spellings(path: str) -> None:
    assert is_reserved(path)


@pytest.mark.parametrize("path", ORDINARY_PATHS)
def test_ordinary_paths(path: str) -> None:
    assert not is_reserved(path)


@pytest.mark.parametrize("path", RESERVED_SPELLINGS)
def test_validate_refuses_every_spelling_with_the_contract_code(path: str) -> None:
    with pytest.raises(NamespaceReserved) as caught:
        validate_document_path(path)
    assert caught.value.code == "MEMORY_NAMESPACE_RESERVED"
    assert caught.value.status == 403


@pytest.mark.parametrize(
    ("path", "stored"),
    [
        ("notes.md", "notes.md"),
        ("./notes//Today.md", "notes/Today.md"),
        ("/notes/./a/../b.md", "notes/b.md"),
        ("notes\\b.md", "notes/b.md"),
        (".zudotext/other.md", ".zudotext/other.md"),
        ("a%20b.md", "a%20b.md"),
        ("日本語/メモ.md", "日本語/メモ.md"),
        ("notes/", "notes"),
    ],
)
def test_validate_keeps_the_name_and_resolves_structure(path: str, stored: str) -> None:
    assert validate_document_path(path) == stored


@pytest.mark.parametrize(
    "path",
    ["", "   ", "/", ".", "./", "a/..", "//./", "../notes.md", "a/../../b.md", "a\x00b", "a\nb.md"],
)
def test_validate_refuses_empty_root_escaping_and_control_paths(path: str) -> None:
    with pytest.raises(InvalidInput):
        validate_document_path(path)


def test_validate_refuses_non_strings() -> None:
    with pytest.raises(InvalidInput):
        validate_document_path(None)  # type: ignore[arg-type]


def test_normalize_path_is_a_comparison_key() -> None:
    assert normalize_path("./.ZUDOTEXT//Memory\\MEMORY.md") == ".zudotext/memory/memory.md"
    assert normalize_path("%252ezudotext/x/../memory") == ".zudotext/memory"
    assert normalize_path("../../a") == "a"  # clamped at the root
    assert normalize_path("．ｚｕｄｏｔｅｘｔ./memory /x") == ".zudotext/memory/x"


def test_nesting_too_deep_to_settle_fails_closed() -> None:
    path = "notes/today.md"
    for _ in range(12):
        path = quote(path, safe="")
    assert is_reserved(path)


# --- generated spellings --------------------------------------------------------------------

FORMAT_CHARS = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u200e"]
ORDINARY_SEGMENT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=8)


def _percent(ch: str, times: int) -> str:
    encoded = "".join(f"%{b:02X}" for b in ch.encode("utf-8"))
    for _ in range(times - 1):
        encoded = encoded.replace("%", "%25")
    return encoded


@st.composite
def disguised_char(draw: st.DrawFn, ch: str) -> str:
    kind = draw(st.sampled_from(["plain", "case", "fullwidth", "percent1", "percent2", "format"]))
    if kind == "case":
        return ch.upper() if draw(st.booleans()) else ch
    if kind == "fullwidth" and "!" <= ch <= "~":
        ch = chr(ord(ch) + 0xFEE0)
        return ch.upper() if draw(st.booleans()) and ch.isalpha() else ch
    if kind in ("percent1", "percent2"):
        return _percent(ch, 1 if kind == "percent1" else 2)
    if kind == "format":
        return draw(st.sampled_from(FORMAT_CHARS)) + ch
    return ch


@st.composite
def disguised_segment(draw: st.DrawFn, name: str) -> str:
    spelled = "".join(draw(disguised_char(ch)) for ch in name)
    return spelled + draw(st.sampled_from(["", "", ".", " ", ". ", "..", "  "]))


@st.composite
def separator(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(["/", "\\", "/./", "//", "%2F", "%252F", "／"]), min_size=1, max_size=2))
    return "".join(parts)


@st.composite
def detour(draw: st.DrawFn) -> str:
    """`x/..` (or a chain of them) that resolves back to where it started."""
    if not draw(st.booleans()):
        return ""
    name = draw(ORDINARY_SEGMENT)
    dots = draw(st.sampled_from(["..", "%2e%2e", "%252E%252E", "．．", ".%2E"]))
    return name + draw(separator()) + dots + draw(separator())


@st.composite
def reserved_spelling(draw: st.DrawFn) -> str:
    prefix = draw(st.sampled_from(["", "./", "/", "\\", ".\\", "//", "././"]))
    tail = draw(st.lists(ORDINARY_SEGMENT, max_size=3))
    parts = [
        prefix,
        draw(detour()),
        draw(disguised_segment(".zudotext")),
        draw(separator()),
        draw(detour()),
        draw(disguised_segment("memory")),
    ]
    trailing_separator = draw(st.booleans())
    if tail or trailing_separator:
        parts.append(draw(separator()))
    for segment in tail:
        parts += [draw(detour()), segment, draw(separator())]
    return "".join(parts)


@settings(max_examples=200, deadline=None)
@given(reserved_spelling())
def test_generated_spellings_are_reserved(path: str) -> None:
    assert is_reserved(path), path
    with pytest.raises(NamespaceReserved):
        validate_document_path(path)


@st.composite
def ordinary_path(draw: st.DrawFn) -> str:
    first = draw(st.one_of(ORDINARY_SEGMENT, st.just(".zudotext")))
    rest = draw(st.lists(ORDINARY_SEGMENT, min_size=1, max_size=4))
    if first == ".zudotext":
        # Under .zudotext, anything but the memory folder itself.
        rest[0] = draw(
            st.one_of(
                ORDINARY_SEGMENT.filter(lambda s: s != "memory"),
                st.sampled_from(["memoryfoo", "memories", "memory-x", "memory_x", "other.md"]),
            )
        )
    return "/".join([first, *rest]) + draw(st.sampled_from(["", ".md", "/"]))


@settings(max_examples=300, deadline=None)
@given(ordinary_path())
def test_generated_ordinary_paths_are_not_reserved(path: str) -> None:
    assert not is_reserved(path)
    assert validate_document_path(path) == path.rstrip("/")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_a_validated_path_is_never_reserved(path: str) -> None:
    try:
        stored = validate_document_path(path)
    except (InvalidInput, NamespaceReserved):
        return
    assert not is_reserved(stored)
    assert validate_document_path(stored) == stored


@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("notes/\u202etxt.md", "a bidi control character (U+202E)"),
        ("no\u200btes.md", "an invisible character (U+200B)"),
        ("cafe\u0301.md", "a combining mark (U+0301)"),
    ],
)
def test_a_lookalike_path_is_refused_naming_the_character(path: str, what: str) -> None:
    from memframe.core.errors import InvalidInput
    from memframe.core.namespace import refuse_lookalike

    with pytest.raises(InvalidInput, match=re.escape(what)):
        refuse_lookalike(path)


def test_decomposed_accents_pass_where_combining_marks_are_allowed_and_plain_names_always() -> None:
    from memframe.core.namespace import refuse_lookalike

    refuse_lookalike("cafe\u0301.md", combining_marks=False)
    refuse_lookalike("notes/café.md")
    with pytest.raises(Exception, match="bidi"):
        refuse_lookalike("a\u202e.md", combining_marks=False)
