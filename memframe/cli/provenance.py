"""Where memory came from and how it leaves: blame, revert, import, export, and the section budget.

Everything here is computed on this machine from decrypted versions (`memframe.core.blame`,
`revert`, `sections`); the server is asked for versions and ids only, never for text.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memframe.cli.options import add_command, open_workspace, positive
from memframe.cli.output import EXIT_CONFLICT, out, size_line, verified, when
from memframe.core.wording import many

if TYPE_CHECKING:
    from memframe.core.blame import BlameLine
    from memframe.core.types import MemoryDocument


def iso_utc(ts: float) -> str:
    """A moment as porcelain prints it: ISO 8601, UTC, to the second."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def cmd_blame(args: argparse.Namespace) -> int:
    from memframe.backend.blame_input import revisions
    from memframe.core.blame import blame
    from memframe.core.errors import NotFound

    backend = open_workspace(args)
    try:
        head = backend.load().version
        at = head if args.at is None else args.at
        if at > head:
            raise NotFound(f"There is no version {at}; the current version is {head}.")
        captures = backend.capture_messages()
        lines = blame(revisions(backend, at, captures))
    finally:
        backend.close()
    if args.porcelain:
        for b in lines:
            who = b.imported_from or b.who if b.author.value == "person" else (b.who or "assistant")
            sys.stdout.write(
                f"{b.version}\t{b.author.value}\t{who}\t{iso_utc(b.time)}\t{b.text.rstrip(chr(13) + chr(10))}\n"
            )
        return 0
    if not lines:
        out(f"Version {at} is empty." if at else "No revisions yet.")
        return 0
    for b in lines:
        out(f"{b.version:>6}  {_who(b):24.24}  {when(b.time)}  {b.text.rstrip(chr(13) + chr(10))}")
    shown = sorted({b.version for b in lines if b.version in captures})
    if shown:
        out()
        out("Why the Assistant wrote them:")
    for version in shown:
        capture = captures[version]
        moment = next(b.time for b in lines if b.version == version)
        out(f"  version {version} · conversation {capture.conversation_id} · {when(moment)}")
        said = "(not in the transcript)" if capture.message is None else repr(capture.message)
        out(f"    your message: {said}")
        out(f"    its receipts: memframe receipts -c {capture.conversation_id}")
    return 0


def _who(b: BlameLine) -> str:
    from memframe.core.types import Author, Operation

    who = b.imported_from or b.who if b.author is Author.PERSON else f"Assistant {b.who}"
    if b.operation is Operation.UNDO and b.restored_from is not None:
        who += f" (undo of {b.restored_from})"
    return who


def cmd_revert(args: argparse.Namespace) -> int:
    from memframe.core.errors import NotFound
    from memframe.core.revert import revert

    backend = open_workspace(args)
    try:
        doc = backend.load()
        if args.revision > doc.version:
            raise NotFound(f"There is no version {args.revision}; the current version is {doc.version}.")
        before = backend.read_revision(args.revision - 1) if args.revision > 1 else ""
        reverted = revert(before, backend.read_revision(args.revision), doc.text)
        if reverted.text is None:
            for c in reverted.conflicts:
                out(f"conflict at line {c.line} of version {doc.version}:")
                out("  the revert would remove:")
                out("".join(f"  - {line.rstrip(chr(10))}\n" for line in c.removing).rstrip("\n") or "  (nothing)")
                out("  and put back:")
                out("".join(f"  + {line.rstrip(chr(10))}\n" for line in c.restoring).rstrip("\n") or "  (nothing)")
                out("  where the current text has:")
                out("".join(f"    {line.rstrip(chr(10))}\n" for line in c.current).rstrip("\n") or "    (nothing)")
            print(
                f"memframe: later edits touched the lines version {args.revision} changed; nothing was written.",
                file=sys.stderr,
            )
            return EXIT_CONFLICT
        if reverted.text == doc.text:
            out(f"Version {args.revision} changed nothing that is still there; nothing was written.")
            return 0
        info = backend.save(reverted.text, doc.version)
    finally:
        backend.close()
    out(f"Reverted version {args.revision}'s change as version {info.version} ({size_line(info.size)}).")
    return 0


def section_table(doc: MemoryDocument) -> None:
    """`show --sections`: bytes per top-level heading and their share of the recall bound."""
    from memframe.core.sections import sections
    from memframe.core.types import MEMORY_RECALL_MAX_BYTES

    out(f"{'section':40}  {'bytes':>7}  {'share':>6}")
    for s in sections(doc.text):
        out(f"{s.title[:40]:40}  {s.size:>7,}  {s.share:>6.1%}")
    out(
        f"{'total':40}  {doc.size:>7,}  {doc.size / MEMORY_RECALL_MAX_BYTES:>6.1%} of {MEMORY_RECALL_MAX_BYTES:,} bytes"
    )
    if doc.oversized:
        out("Over the bound: the memory is kept, and withheld from recall until it is shortened.")


def cmd_import(args: argparse.Namespace) -> int:
    from memframe.backend.source_notes import source_name
    from memframe.core.errors import InvalidInput
    from memframe.core.sections import place_under
    from memframe.core.types import MEMORY_RECALL_MAX_BYTES

    source = Path(args.file)
    name = source_name(source.name)  # blame names the lines' file: a name it can print, or nothing is read
    try:
        addition = source.read_bytes().decode("utf-8")
    except OSError as exc:
        raise InvalidInput(f"Cannot read {source}: {exc.strerror}.") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{source} is not UTF-8 text; nothing was imported.") from None
    backend = open_workspace(args)
    try:
        doc = backend.load()
        info = backend.save(place_under(doc.text, addition, args.under), doc.version, source=name)
    finally:
        backend.close()
    out(f"Imported {name} as version {info.version} ({size_line(info.size)}).")
    if info.size > MEMORY_RECALL_MAX_BYTES:
        out("The memory is now over the bound: it is kept, and withheld from recall until it is shortened.")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    import json

    from memframe.backend.archive import build_archive
    from memframe.backend.workspaces import load_key
    from memframe.cli.output import prompt

    backend = open_workspace(args)
    try:
        if args.markdown:
            sys.stdout.write(backend.load().text)
            return 0
        archive = build_archive(backend, load_key(args.workspace, remote_url=args.remote, prompt=prompt))
    finally:
        backend.close()
    Path(args.archive).write_text(json.dumps(archive, indent=1) + "\n", encoding="utf-8")
    count = sum(len(f["versions"]) for f in archive["files"])
    documents = many(len(archive["files"]), "document")
    out(f"Wrote {many(count, 'sealed version')} of {documents} to {args.archive}.")
    return 0


def verify_archive(args: argparse.Namespace) -> int:
    """`verify --archive FILE`: offline, with this machine's key for the archive's workspace."""
    from memframe.backend.archive import read_archive, verify_archive
    from memframe.backend.workspaces import load_key
    from memframe.cli.output import prompt
    from memframe.core.errors import InvalidInput

    try:
        raw = Path(args.archive).read_bytes()
    except OSError as exc:
        raise InvalidInput(f"Cannot read {args.archive}: {exc.strerror}.") from None
    data: dict[str, Any] = read_archive(raw)
    key = load_key(data["workspace"], remote_url=args.remote, prompt=prompt)
    checked, total = verify_archive(data, key, args.archive)
    out(f"The archive of {data['workspace']!r} checks: {verified(len(checked), total)}.")
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add blame, revert, import and export to the memframe command."""
    p = add_command(sub, common, "blame", cmd_blame, "show each line of the memory with the version that wrote it")
    p.add_argument("--at", type=positive, default=None, metavar="N", help="blame revision N (default: the current)")
    p.add_argument("--porcelain", action="store_true", help="VERSION, AUTHOR, WHO, TIME, TEXT: tab-separated")
    p = add_command(sub, common, "revert", cmd_revert, "undo only version N's change, as a new version")
    p.add_argument("revision", type=positive, metavar="N")
    p = add_command(sub, common, "import", cmd_import, "add another assistant's memory file as one Save")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--under", metavar="HEADING", default=None, help="add it at the end of this top-level heading")
    p = add_command(sub, common, "export", cmd_export, "write the current text, or every sealed version")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--markdown", action="store_true", help="print the current text")
    what.add_argument("--archive", metavar="FILE", help="write every sealed version, its metadata and the key check")
