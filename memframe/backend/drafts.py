"""The way out for a draft the server will not take: a private file on this machine.

With a revoked token or a long outage, a Save cannot succeed, and the person
should not have to choose between waiting and discarding. The frame offers to
write the draft here instead: `drafts/<workspace>-<UTC time>.md` under the
memframe home (the user data directory, or `$MEMFRAME_HOME`), mode 0600 in a
0700 folder. It is plain text, outside the encrypted store, written only when
the person asks, and never read back by memframe: they paste it in and Save
when the server takes it again, then delete the file.
"""

from __future__ import annotations

import time
from pathlib import Path

from memframe import paths


def drafts_dir() -> Path:
    return paths.home() / "drafts"


def write_draft(workspace_id: str, text: str, *, now: float) -> Path:
    """Write `text` to a new private file named for the workspace and the time; returns its path.

    An existing file is never overwritten: a second draft in the same second gets a numbered name.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    folder = drafts_dir()
    name = f"{paths.check_workspace_id(workspace_id)}-{stamp}"
    target = folder / f"{name}.md"
    n = 1
    while target.exists():
        n += 1
        target = folder / f"{name}-{n}.md"
    from memframe.paths import write_private_file  # the atomic 0600 write the key files use

    write_private_file(target, text.encode("utf-8"))
    return target
