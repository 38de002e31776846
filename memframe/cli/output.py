"""The CLI's terminal: one wording each for a line, a time, a size, a receipt; and its one prompt.

Light on purpose: the fast `history -p` path uses `when` and `prompt`, so this
module imports only `sys` and `time` at the top.
"""

from __future__ import annotations

import sys
import time

#: A failure a person can cause: bad input, a missing workspace or key, a server that cannot be reached.
EXIT_ERROR = 1
#: Someone else wrote first (a version or policy conflict): the message names the server's version.
EXIT_CONFLICT = 3
#: Ctrl+C: nothing more was written.
EXIT_INTERRUPTED = 130

TYPE_CHECKING = False
if TYPE_CHECKING:
    from memframe.core.types import RecallStatus


def out(line: str = "") -> None:
    """One line to standard output."""
    print(line)


def when(ts: float) -> str:
    """A moment as the CLI shows it: local time to the second."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def size_line(size: int) -> str:
    """A memory's size against the recall bound, and what being over it means."""
    from memframe.core.types import MEMORY_RECALL_MAX_BYTES

    line = f"{size:,} / {MEMORY_RECALL_MAX_BYTES:,} bytes"
    if size > MEMORY_RECALL_MAX_BYTES:
        line += " — OVERSIZED: kept intact, but not recalled and closed to automatic capture until shortened"
    return line


def receipt_line(status: RecallStatus, revision: int | None, call_index: int) -> str:
    """What one model call was given (`call_index` counts from 0, as receipts store it)."""
    from memframe.core.recall import receipt_line as line

    return line(status, revision, call_index + 1)


def prompt(question: str) -> str:
    """Ask for a passphrase on the terminal; "" when there is none (scripts set the variable)."""
    if not sys.stdin.isatty():
        return ""
    import getpass

    return getpass.getpass(question)
