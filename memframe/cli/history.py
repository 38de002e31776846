"""`memframe history -p`: every revision of a page with its diff, like `git log -p`; and
`memframe history --accept-server`, a person's word that a restored server's history stands.

The revisions come through the Backend like every other command's reads: one page of
metadata, then every text it needs in one read, decrypted on this machine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memframe.backend.base import Backend
from memframe.cli.output import out, when
from memframe.core.diffs import unified_diff_text

if TYPE_CHECKING:
    from memframe.backend.sealed import SealedBackend

PAGE_DEFAULT = 50


def patch(backend: Backend, limit: int, before: int | None) -> str:
    """Up to `limit` revisions below `before`, newest first, each with its diff against the one before."""
    rows = backend.history(limit=limit, before=before)
    wanted = sorted({r.version for r in rows} | {r.version - 1 for r in rows if r.version > 1})
    texts = backend.read_revisions(wanted)
    out: list[str] = []
    for r in rows:
        older = texts[r.version - 1] if r.version > 1 else ""
        out.append(f"revision {r.version} · {when(r.created_at)} · {r.author.value} {r.actor} · {r.operation.value}\n")
        out.append(unified_diff_text(older, texts[r.version], f"revision {r.version - 1}", f"revision {r.version}"))
        out.append("\n")
    return "".join(out)


def accept_server(backend: SealedBackend) -> int:
    """Stop expecting versions the server no longer has (after a restore); say what, and where it is logged."""
    from memframe.backend.accept_history import accept_server_history, accepted_log

    went_back = accept_server_history(backend)
    where = f"workspace {backend.workspace_id!r} at {backend.location}"
    if not went_back:
        out(f"Nothing to accept: the server shows every version this machine has seen of {where}.")
        return 0
    out(f"This machine now takes the server's history of {where} as it is:")
    for w in went_back:
        out(f"  {w.line()}")
    out("Anything saved after the server's copy was made is not on it; a Clear made since is undone too.")
    if backend.seen.file is not None:
        out(f"Recorded in {accepted_log(backend.seen.file)}.")
    return 0
