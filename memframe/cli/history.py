"""`memframe history -p`: every revision of a page with its diff, like `git log -p`.

The revisions come through the Backend like every other command's reads: one page of
metadata, then every text it needs in one read, decrypted on this machine.
"""

from __future__ import annotations

from memframe.backend.base import Backend
from memframe.cli.output import when
from memframe.core.diffs import unified_diff_text

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
