"""Messages, proposals, rotation records and source notes: sealed in the same format as file versions, unchained.

Each is bound by its place (`memframe.sealing.format`) to where it belongs, so a message cannot be
swapped into a note, reordered or dropped from the middle of its conversation, and a proposal
cannot be moved to another workspace or id.
"""

from __future__ import annotations

from memframe.sealing.format import (
    aead,
    associated_data,
    header,
    open_version,
    proposal_place,
    rotation_place,
    seal_v2,
    source_place,
    transcript_place,
    utf8,
)


def seal_message(key: bytes, text: str, *, workspace_id: str, conversation_id: str, seq: int, role: str) -> bytes:
    """A transcript message, bound to its conversation, position and role."""
    return seal_v2(key, text, transcript_place(workspace_id, conversation_id, seq, role))


def seal_proposal(key: bytes, text: str, *, workspace_id: str, proposal_id: str) -> bytes:
    return seal_v2(key, text, proposal_place(workspace_id, proposal_id))


def open_message(
    key: bytes, blob: bytes, *, workspace_id: str, conversation_id: str, seq: int, role: str, legacy: bool = False
) -> str:
    """A transcript message at position `seq`; `legacy` admits one sealed v1 under its old path."""
    legacy_ad = associated_data(workspace_id, f"conversations/{conversation_id}") if legacy else None
    place = transcript_place(workspace_id, conversation_id, seq, role)
    return utf8(open_version(aead(key), blob, place, legacy_ad)[0])


def open_transcript(
    key: bytes, workspace_id: str, conversation_id: str, rows: list[tuple[str, bytes]]
) -> list[tuple[str, str]]:
    """Open a conversation's (role, sealed) messages in order, each at its position and role; an
    old-format message opens only before the conversation's first new-format one (no downgrade)."""
    out: list[tuple[str, str]] = []
    chained = False
    for seq, (role, blob) in enumerate(rows, start=1):
        chained = chained or header(blob) is not None
        text = open_message(
            key,
            blob,
            workspace_id=workspace_id,
            conversation_id=conversation_id,
            seq=seq,
            role=role,
            legacy=not chained,
        )
        out.append((role, text))
    return out


def open_proposal(key: bytes, blob: bytes, *, workspace_id: str, proposal_id: str, legacy_path: str) -> str:
    """Proposals are short-lived: a v1 one (under its old path) still opens."""
    place, legacy_ad = proposal_place(workspace_id, proposal_id), associated_data(workspace_id, legacy_path)
    return utf8(open_version(aead(key), blob, place, legacy_ad)[0])


def seal_rotation(key: bytes, text: str, *, workspace_id: str, number: int) -> bytes:
    """A key rotation's record, sealed under the new key: a server cannot forge a forgetting."""
    return seal_v2(key, text, rotation_place(workspace_id, number))


def open_rotation(key: bytes, blob: bytes, *, workspace_id: str, number: int) -> str:
    return utf8(open_version(aead(key), blob, rotation_place(workspace_id, number), None)[0])


def seal_source(key: bytes, name: str, *, workspace_id: str, path: str, version: int) -> bytes:
    """A version's source note (the file name it was imported from), bound to that very version."""
    return seal_v2(key, name, source_place(workspace_id, path, version))


def open_source(key: bytes, blob: bytes, *, workspace_id: str, path: str, version: int) -> str:
    """A source note, opened only at the version it was sealed for (DecryptionFailed elsewhere)."""
    return utf8(open_version(aead(key), blob, source_place(workspace_id, path, version), None)[0])
