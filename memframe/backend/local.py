"""The local backend: the service in-process on an embedded SQLite file.

No server is needed; the person is the embedded database's `local` user.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from memframe.backend.heads import SeenHeads
from memframe.backend.save_state import SaveState
from memframe.backend.sealed import SealedBackend
from memframe.core.types import Mode, Policy, StoredVersion, VersionInfo
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER

if TYPE_CHECKING:
    from memframe.assistant.ingress import AssistantEndpoint
    from memframe.assistant.models import ModelClient
    from memframe.core.blame import CaptureOrigin
    from memframe.core.rotation import Destroyed, Rotation, RotationPlan, SealedRecords
    from memframe.core.turns import AIConsent, KeySessionInfo, ProposalRecord, Receipt, TurnResult


class LocalStore:
    """MemoryStore over a MemoryService in this process."""

    def __init__(
        self,
        service: MemoryService,
        workspace_id: str,
        user: str = LOCAL_USER,
        *,
        owns_service: bool = False,
        model: ModelClient | None = None,
    ) -> None:
        self.service = service
        self.workspace_id = workspace_id
        self.user = user
        self.location = service.db.identity()
        self._owns_service = owns_service
        self._model = model

    @property
    def assistant_model(self) -> str:
        """The model this process was given, or the scripted demo when none is configured anywhere."""
        from memframe.assistant.models import describe

        return describe(self._model)

    @cached_property
    def endpoint(self) -> AssistantEndpoint:
        """The Assistant's runtime, built on first use: commands and the frame that never talk to the
        Assistant do not pay for importing it."""
        from memframe.assistant.automation import InProcessAutomation
        from memframe.assistant.ingress import AssistantEndpoint
        from memframe.assistant.models import ScriptedModel
        from memframe.assistant.runtime import Runtime

        runtime = Runtime(InProcessAutomation(self.service), self._model or ScriptedModel())
        return AssistantEndpoint(self.service, runtime)

    def get_file(self, path: str) -> StoredVersion | None:
        return self.service.get_file(self.user, self.workspace_id, path)

    def put_file(
        self,
        path: str,
        ciphertext: bytes,
        base_version: int,
        *,
        clear: bool = False,
        restored_from: int | None = None,
        revive: bool = False,
        source_note: bytes | None = None,
    ) -> VersionInfo:
        return self.service.put_file(
            self.user,
            self.workspace_id,
            path,
            ciphertext,
            base_version,
            clear=clear,
            restored_from=restored_from,
            revive=revive,
            source_note=source_note,
        )

    def list_versions(self, path: str, *, limit: int = 50, before: int | None = None) -> list[VersionInfo]:
        return self.service.list_versions(self.user, self.workspace_id, path, limit=limit, before=before)

    def list_files(self) -> list[tuple[str, int, bool]]:
        return self.service.list_files(self.user, self.workspace_id)

    def get_version(self, path: str, version: int) -> StoredVersion:
        return self.service.get_version(self.user, self.workspace_id, path, version)

    def get_versions(self, path: str, versions: Sequence[int]) -> list[StoredVersion]:
        return self.service.get_versions(self.user, self.workspace_id, path, versions)

    def replace_version(self, path: str, version: int, expected_hash: str, ciphertext: bytes) -> bool:
        """Compaction's compare-and-set rewrite of one old version (see `MemoryService.compact_version`)."""
        return self.service.compact_version(self.user, self.workspace_id, path, version, expected_hash, ciphertext)

    def get_policy(self) -> Policy:
        return self.service.get_policy(self.user, self.workspace_id)

    def set_policy(self, mode: Mode, expected_revision: int) -> Policy:
        return self.service.set_policy(self.user, self.workspace_id, mode, expected_revision)

    # --- the Assistant ----------------------------------------------------------------------

    def get_ai(self) -> AIConsent:
        return self.service.assistant.ai_consent(self.user, self.workspace_id)

    def set_ai(self, enabled: bool) -> AIConsent:
        return self.service.assistant.set_ai(self.user, self.workspace_id, enabled)

    def get_key_check(self) -> str | None:
        return self.service.get_key_check(self.user, self.workspace_id)

    def set_key_check(self, key_check: str) -> None:
        self.service.set_key_check(self.user, self.workspace_id, key_check)

    def rotation(self) -> Rotation | None:
        return self.service.latest_rotation(self.user, self.workspace_id)

    def sealed_records(self) -> SealedRecords:
        return self.service.sealed_records(self.user, self.workspace_id)

    def rotate_key(self, plan: RotationPlan) -> Destroyed:
        return self.service.rotate_key(self.user, self.workspace_id, plan)

    def open_key_session(self, key: bytes) -> KeySessionInfo:
        return self.service.assistant.open_key_session(self.user, self.workspace_id, key)

    def revoke_key_session(self, session_id: str) -> None:
        self.service.assistant.revoke_key_session(self.user, session_id)

    def send_message(
        self,
        conversation_id: str,
        text: str,
        *,
        idempotency_key: str,
        key_session_id: str | None,
        memory_state: str | None,
        on_text: Callable[[str], None] | None = None,
    ) -> TurnResult:
        return self.endpoint.send(
            self.user,
            self.workspace_id,
            conversation_id,
            text,
            idempotency_key=idempotency_key,
            key_session_id=key_session_id,
            memory_state=memory_state,
            on_text=on_text,
        )

    def receipts(self, conversation_id: str) -> list[Receipt]:
        return self.service.assistant.receipts(self.user, conversation_id)

    def transcript(self, conversation_id: str) -> list[tuple[str, bytes]]:
        return self.service.assistant.transcript(self.user, conversation_id)

    def capture_origins(self) -> list[CaptureOrigin]:
        return self.service.assistant.capture_origins(self.user, self.workspace_id)

    def proposals(self) -> list[ProposalRecord]:
        return self.service.assistant.proposals(self.user, self.workspace_id)

    def resolve_proposal(self, proposal_id: str, status: str) -> None:
        self.service.assistant.resolve_proposal(self.user, self.workspace_id, proposal_id, status)

    def close(self) -> None:
        if self._owns_service:
            self.service.close()


class LocalBackend(SealedBackend):
    """The default backend: memory on this machine, in `memframe.db` under the memframe home."""

    def __init__(
        self,
        service: MemoryService | str | Path,
        workspace_id: str,
        key: bytes,
        *,
        user: str = LOCAL_USER,
        save_state: SaveState | None = None,
        model: ModelClient | None = None,
        owns_service: bool | None = None,
        seen: SeenHeads | None = None,
    ) -> None:
        """`service` is a MemoryService, or a database path to open one on; the backend closes the
        service it opened itself, or one handed over with `owns_service=True`."""
        opened = not isinstance(service, MemoryService)
        owns = opened if owns_service is None else owns_service
        svc = MemoryService(service) if opened else service  # type: ignore[arg-type]
        store = LocalStore(svc, workspace_id, user, owns_service=owns, model=model)  # type: ignore[arg-type]
        super().__init__(store, key, save_state=save_state, seen=seen)
