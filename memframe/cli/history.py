"""`memframe history -p`: every revision of a page with its diff, like `git log -p`, and as quick.

The output is made here for both ways of reaching the revisions: the full CLI's
(any backend, through `SealedBackend`) and a short path for the usual case, a local
workspace named on a plain command line. The short path is taken before argparse,
the service or the backends are imported: it reads the revisions in one query-only
snapshot (`memframe.service.reads`), decrypts each as it arrives, diffs it
against the one before with `unified_diff_counted` (which splits only the lines that
changed and their context), and writes the whole output once. Whatever it is not
sure of (a remote, an option it does not know, a database the service must migrate
first, a workspace the local user is not a member of, a page over the service's
bound) goes the full way, so the output and every error are the full CLI's.
"""

from __future__ import annotations

import sys

from memframe.cli.output import when
from memframe.core.diffs import unified_diff_counted

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from memframe.backend.sealed import SealedBackend
    from memframe.service.reads import Revision

_OPTIONS = {"--limit": "limit", "--before": "before", "-w": "workspace", "--workspace": "workspace"}
PAGE_DEFAULT = 50
#: The service's bound on a page of history (`files.list_versions`); a longer one gets its error.
MAX_PAGE = 1000


def plain_request(argv: Sequence[str]) -> tuple[str, int, int | None] | None:
    """(workspace, limit, before) when `argv` (after `history`) is a plain `-p` on the local
    workspace that argparse would read the same way; None for anything else."""
    from memframe import settings

    current = settings.current()  # the full CLI's defaults too: a bad config file is its one error line
    if current.remote_url:
        return None
    values: dict[str, str] = {}
    patch = False
    args = iter(argv)
    for arg in args:
        if arg in ("-p", "--patch"):
            patch = True
            continue
        name, eq, value = arg.partition("=")
        if name not in _OPTIONS or (eq and not name.startswith("--")):
            return None
        if not eq:
            value = next(args, "")
        if not value or value.startswith("-"):
            return None  # argparse has its own rules for these: let it apply them
        values[_OPTIONS[name]] = value
    if not patch:
        return None
    try:  # as the full CLI's `--limit` and `--before` read them: int(), then at least 1
        limit = int(values.get("limit", PAGE_DEFAULT))
        before = int(values["before"]) if "before" in values else None
    except ValueError:
        return None
    if not 1 <= limit <= MAX_PAGE or (before is not None and before < 1):
        return None
    return values.get("workspace") or current.workspace, limit, before


def patch_local(
    workspace_id: str, limit: int, before: int | None, *, prompt: Callable[[str], str] | None = None
) -> int | None:
    """`history -p` on a local workspace without the service; None when the full CLI must do it.
    `prompt` asks for the key's passphrase when it is wrapped and MEMFRAME_PASSPHRASE is not set."""
    from memframe import paths
    from memframe.service.reads import open_local_revisions

    paths.check_workspace_id(workspace_id)
    snapshot = open_local_revisions(workspace_id, paths.local_database_location())
    if snapshot is None:
        return None
    try:
        key = _local_key(workspace_id, prompt)
        out = render_patch(snapshot.revisions(key, limit=limit + 1, before=before), limit)
    finally:
        snapshot.close()
    write_out(out)
    return 0


def _local_key(workspace_id: str, prompt: Callable[[str], str] | None) -> bytes:
    """The local workspace's key, as `backend.workspaces.load_key` reads it. A raw key file is read
    here, from its location as a string (no pathlib); a wrapped, missing or damaged one is left to
    `load_key`, which asks for the passphrase or says what is wrong in its own words."""
    from memframe import paths
    from memframe.sealing import keyfiles

    try:
        with open(paths.key_file_location(workspace_id), "rb") as fh:
            raw = fh.read()
        if not keyfiles.key_file_is_wrapped(raw):
            return keyfiles.decode_key_file(raw)
    except Exception:  # every failure is load_key's to report, in its words
        pass
    from memframe.sealing.keyfiles import load_key

    return load_key(workspace_id, prompt=prompt)


def patch_backend(backend: SealedBackend, limit: int, before: int | None) -> bytes:
    """The same output through any backend: one page, then every text it needs in one read."""
    rows = backend.history(limit=limit, before=before)
    wanted = sorted({r.version for r in rows} | {r.version - 1 for r in rows if r.version > 1})
    texts = backend.read_revisions(wanted)
    revisions: list[Revision] = [
        (r.version, r.created_at, r.author.value, r.actor, r.operation.value, texts[r.version], None) for r in rows
    ]
    if rows and rows[-1].version > 1:  # the text the oldest shown revision is diffed against
        base = rows[-1].version - 1
        revisions.append((base, 0.0, "", "", "", texts[base], None))
    return render_patch(revisions, limit)


def render_patch(revisions: Iterable[Revision], limit: int) -> bytes:
    """Up to `limit` revisions, newest first, each with its diff against the revision before it.

    `revisions` runs newest first and also holds the revision before the oldest one shown,
    unless that one is revision 1. A revision's `ends` (what its text shares with the one before,
    when its delta says so) spares the diff its search for them.
    """
    out: list[bytes] = []  # encoded piece by piece: a diff is mostly ASCII, which encodes as a copy
    stream = iter(revisions)
    newer = next(stream, None)
    newlines = None if newer is None else newer[5].count("\n")  # in the newer text: counted once, then carried
    for _ in range(limit):
        if newer is None:
            break
        older = next(stream, None)
        version, created_at, author, actor, operation, text, ends = newer
        if (older[0] if older is not None else 0) != version - 1:
            from memframe.core.errors import NotFound

            raise NotFound(f"There is no revision {version - 1}.")
        diff, newlines = unified_diff_counted(
            older[5] if older else "",
            text,
            f"revision {version - 1}",
            f"revision {version}",
            ends=ends,
            newlines_b=newlines,
        )
        out.append(f"revision {version} · {when(created_at)} · {author} {actor} · {operation}\n".encode())
        out.append(diff.encode())
        out.append(b"\n")
        newer = older
    return b"".join(out)


def write_out(data: bytes) -> None:
    """All of `data` to standard output in one go (after anything already printed)."""
    stream = sys.stdout
    stream.flush()
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        stream.write(data.decode("utf-8"))
        return
    view = memoryview(data)
    while view:  # an unbuffered stdout (python -u) may take a large write in parts
        view = view[buffer.write(view) or 0 :]
    buffer.flush()
