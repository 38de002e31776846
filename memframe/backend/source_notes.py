"""Where an imported version came from: its source note, sealed and opened on this machine.

`memframe import` names the file a text came from, and blame shows its lines as imported from it; the
name is sealed with the version under the workspace key, bound to its workspace, path and version, so
the server stores no name in clear and cannot move a note to another version or forge one.
"""

from __future__ import annotations

from memframe import sealing
from memframe.core.errors import DecryptionFailed, InvalidInput
from memframe.core.types import MEMORY_PATH, SOURCE_NAME_MAX_BYTES, VersionInfo


def source_name(name: str) -> str:
    """`name` as a version's source note, or InvalidInput: printable, 1 to 200 UTF-8 bytes.

    Blame prints it in a tab-separated column and the frame in a table cell, so no control,
    tab or line-break character may hide in it."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if not name or size > SOURCE_NAME_MAX_BYTES:
        raise InvalidInput(
            f"A source name (an imported file's name) is 1 to {SOURCE_NAME_MAX_BYTES} bytes of UTF-8 ({size} given);"
            " nothing was saved."
        )
    if not name.isprintable():
        raise InvalidInput(
            "A source name (an imported file's name) must be printable: no control, tab or line-break characters;"
            " nothing was saved."
        )
    return name


class SourceNotes:
    """What `SealedBackend` does with source notes: seal one for a Save, open one for blame."""

    _key: bytes

    @property
    def workspace_id(self) -> str:
        raise NotImplementedError  # SealedBackend's

    def _source_note(self, source: str | None, base_version: int) -> bytes | None:
        """`source` sealed as the note of version base+1 of the memory (None: no note)."""
        if source is None:
            return None
        name = source_name(source)  # InvalidInput before anything is sealed or sent
        version = base_version + 1
        return sealing.seal_source(self._key, name, workspace_id=self.workspace_id, path=MEMORY_PATH, version=version)

    def source_of(self, info: VersionInfo) -> str | None:
        if info.source_note is None:
            return None
        try:
            return sealing.open_source(
                self._key, info.source_note, workspace_id=self.workspace_id, path=MEMORY_PATH, version=info.version
            )
        except DecryptionFailed:
            raise DecryptionFailed(
                f"The source note of version {info.version} does not open at that version: it was altered or"
                " moved from another version (tampering), so it is not shown."
            ) from None
