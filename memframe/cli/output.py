"""The CLI's terminal: one wording each for a line, a time and a size; and its one prompt."""

from __future__ import annotations

import sys
import time

from memframe.core.types import MEMORY_RECALL_MAX_BYTES
from memframe.core.wording import many

#: A failure a person can cause: bad input, a missing workspace or key, a server that cannot be reached.
EXIT_ERROR = 1
#: Someone else wrote first (a version or policy conflict): the message names the server's version.
EXIT_CONFLICT = 3
#: Ctrl+C: nothing more was written.
EXIT_INTERRUPTED = 130


def out(line: str = "") -> None:
    """One line to standard output."""
    print(line)


def when(ts: float) -> str:
    """A moment as the CLI shows it: local time to the second."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def size_line(size: int) -> str:
    """A memory's size against the recall bound, and what being over it means."""
    line = f"{size:,} / {MEMORY_RECALL_MAX_BYTES:,} bytes"
    if size > MEMORY_RECALL_MAX_BYTES:
        line += " — OVERSIZED: kept intact, but not recalled and closed to automatic capture until shortened"
    return line


def prompt(question: str) -> str:
    """Ask for a passphrase on the terminal; "" when there is none (scripts set the variable)."""
    if not sys.stdin.isatty():
        return ""
    import getpass  # here: most commands never prompt, and `history -p` starts without it

    return getpass.getpass(question)


def verified(documents: int, versions: int) -> str:
    """What `verify` and `verify --archive` say they checked."""
    return f"{many(documents, 'document')}, {many(versions, 'version')} verified"
