"""Z1: every spelling of .zudotext/memory/ is reserved — the spellings mutation testing found
unpinned (issue 18): `..` with trailing white space, Windows-empty segments, stream names with
several `:`, more than one NUL, and percent escapes that are not UTF-8."""

from __future__ import annotations

import pytest

from memframe.core.errors import NamespaceReserved
from memframe.core.namespace import is_reserved, validate_document_path

SPELLINGS = {
    "dotdot-trailing-space": "notes/.. /.zudotext/memory/MEMORY.md",
    "dotdot-trailing-tab": "notes/..\t/.zudotext/memory/MEMORY.md",
    "dotdot-leading-space": "notes/ ../.zudotext/memory/MEMORY.md",
    "windows-empty-three-dots": ".zudotext/.../memory/MEMORY.md",
    "windows-empty-dots-and-space": "... /.zudotext/. . /memory/MEMORY.md",
    "windows-trailing-dots": ".zudotext.../memory. /MEMORY.md",
    "windows-empty-then-dotdot": "notes/.../../.zudotext/memory/MEMORY.md",
    "windows-dot-space-dot-then-dotdot": "notes/. ./../.zudotext/memory/MEMORY.md",
    "three-dots-kept-literally-then-dotdot": ".zudotext/memory/.../../x",
    "stream-one-colon": ".zudotext:x/memory/MEMORY.md",
    "stream-two-colons": ".zudotext::$DATA/memory/MEMORY.md",
    "stream-three-colons": ".zudotext:a:b:c/memory:s:$DATA/MEMORY.md",
    "two-nuls": ".zudotext/memory\x00a\x00b",
    "two-nuls-hiding-dotdot": ".zudotext/memory/x\x00/../../notes\x00/y",
    "invalid-utf8-escape": ".zudotext/memory/%ff",
    "invalid-utf8-escape-before": "%ff/../.zudotext/memory/x",
    "truncated-utf8-escape": ".zudotext/memory/%e3%81",
}


@pytest.mark.parametrize("path", list(SPELLINGS.values()), ids=list(SPELLINGS))
def test_Z1_every_spelling_of_the_namespace_is_reserved(path: str) -> None:
    assert is_reserved(path)
    with pytest.raises(NamespaceReserved):
        validate_document_path(path)


ORDINARY = {
    "invalid-utf8-escape": "notes/%ff.md",
    "stream-in-a-note": "notes/a:b:c.md",
    "nul-in-a-note": "notes/a\x00b\x00c",
    "dotdot-space-staying-out": "notes/.. /other.md",
    "three-dots-name": "notes/.../x.md",
    "memory-lookalike-folder": "notes/.zudotext/memory/x.md",
}


@pytest.mark.parametrize("path", list(ORDINARY.values()), ids=list(ORDINARY))
def test_Z1_an_ordinary_odd_path_is_answered_not_raised(path: str) -> None:
    assert is_reserved(path) is False
