"""Where memframe keeps things on a person's machine, decided in one place.

Everything lives under one home folder: the platform's user data directory,
or `MEMFRAME_HOME` when set (tests always set it, so they never touch a real
home). The local embedded workspace database and the key files sit there.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from memframe import settings
from memframe.core.errors import InvalidInput

_WORKSPACE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def home() -> Path:
    """The home folder, as `memframe.settings` reads it (`$MEMFRAME_HOME` or the user data directory)."""
    return settings.current().home


def local_database() -> Path:
    return home() / "memframe.db"


def check_workspace_id(workspace_id: str) -> str:
    """Workspace ids appear in file names and URLs, so they are kept plain."""
    if _WORKSPACE_ID.fullmatch(workspace_id) is None or workspace_id in (".", ".."):
        raise InvalidInput(
            f"{workspace_id!r} is not a workspace name: use letters, digits, '.', '_' or '-' "
            "(at most 64, starting with a letter or digit)."
        )
    return workspace_id


#: Names of this machine's loopback interface: one server, however its URL names it.
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def server_identity(remote_url: str) -> str:
    """A server URL as one spelling: scheme and host in lower case, loopback names as 127.0.0.1, no
    default port, no user part, query or trailing slash. The usual spelling is its own identity, so
    its key folder is the one it always had; what is not a URL stays as spelled (and is refused)."""
    from urllib.parse import urlsplit

    text = remote_url.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return text.rstrip("/")
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in ("http", "https") or not host:
        return text.rstrip("/")
    host = "127.0.0.1" if host in _LOOPBACK else f"[{host}]" if ":" in host else host
    netloc = host if port in (None, {"http": 80, "https": 443}[scheme]) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def key_scope(remote_url: str | None, *, as_spelled: bool = False) -> str:
    """Keys of a local workspace and of a server's workspace of the same name never mix. A server's
    folder is named by its identity (`server_identity`), not by how its URL was spelled; `as_spelled`
    names the folder older memframes made from the spelling itself."""
    remote_url = remote_url if as_spelled or not remote_url else server_identity(remote_url)
    if not remote_url:
        return "local"
    slug = re.sub(r"[^A-Za-z0-9]+", "-", remote_url.split("://", 1)[-1]).strip("-")[:40]
    digest = hashlib.sha256(remote_url.rstrip("/").encode()).hexdigest()[:8]
    return f"{slug}-{digest}"


def key_file(workspace_id: str, remote_url: str | None = None) -> Path:
    return home() / "keys" / key_scope(remote_url) / f"{check_workspace_id(workspace_id)}.key"


def write_private_file(path: Path, data: bytes) -> None:
    """Create a file readable only by its owner, atomically: no window where it is 0644."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
