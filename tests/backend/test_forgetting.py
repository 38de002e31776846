"""`memframe.backend.forgetting`: the one path the CLI and the frame run to rotate the key and forget."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memframe import paths, sealing
from memframe.backend import forgetting
from memframe.backend.local import LocalBackend
from memframe.core.errors import InvalidInput, KeyFileError, Unavailable, VersionConflict
from memframe.sealing import keyfiles
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER

WORKSPACE = "default"


@pytest.fixture
def service(memframe_home: Path) -> Iterator[MemoryService]:
    svc = MemoryService(memframe_home / "memframe.db")
    svc.accounts.add_user(LOCAL_USER)
    svc.accounts.create_workspace(WORKSPACE, LOCAL_USER)
    yield svc
    svc.close()


def saved(service: MemoryService, *, passphrase: str | None = None) -> tuple[LocalBackend, bytes]:
    """Five versions, a proposal and its transcript; the key in its key file (wrapped with `passphrase`)."""
    key = sealing.new_key()
    keyfiles.write_key(key, WORKSPACE, passphrase=passphrase)
    backend = LocalBackend(service, WORKSPACE, key)
    for version in range(5):
        backend.save(f"- line {version}\n", version)
    backend.set_ai(True)
    backend.send("c-1", "remember: - Ben prefers tea.")  # Read only: a proposal
    return backend, key


def test_what_goes_names_the_versions_and_counts_the_conversations(service: MemoryService) -> None:
    backend, _ = saved(service)
    goes = forgetting.what_goes(backend, 3, conversations=True, count=True)
    assert (goes.first, goes.head, goes.versions) == (1, 5, 2)
    assert goes.messages == 2 and goes.proposals == 1
    assert "Versions 1–2 of the memory will be destroyed; versions 3–5 will stay." in goes.lines()
    assert "(2 messages, 1 proposal)" in "\n".join(goes.lines())
    with pytest.raises(InvalidInput, match="holds versions 1–5, so N is 2 to 5"):
        forgetting.what_goes(backend, 1, conversations=False)


def test_rotate_keeps_the_new_key_and_a_receipt(service: MemoryService, memframe_home: Path) -> None:
    backend, old = saved(service)
    done = forgetting.rotate(backend, None, forget_before=3, conversations=True, prompt=None, now=1_800_000_000.0)
    assert done.destroyed.versions and done.destroyed.messages == 2 and done.destroyed.proposals == 1
    new = keyfiles.load_key(WORKSPACE)
    assert new != old and not keyfiles.pending_key_file(WORKSPACE).exists()
    assert sealing.key_fingerprint(new) in done.receipt
    assert done.kept_at.read_text() == done.receipt and done.kept_at.is_relative_to(memframe_home / "receipts")
    assert "what a model provider logged of your conversations is outside memframe;" in done.receipt
    gone = backend.forgotten()
    assert gone is not None and gone.at == 1_800_000_000.0 and gone.before == 3
    assert LocalBackend(service, WORKSPACE, new).load().text == "- line 4\n"


def test_a_refused_rotation_drops_the_pending_key_and_changes_nothing(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, old = saved(service)
    other = LocalBackend(service, WORKSPACE, old)
    swap = backend.store.rotate_key

    def racing(plan):  # type: ignore[no-untyped-def]
        other.save("- written meanwhile\n", 5)  # a Save lands between the re-seal and the swap
        return swap(plan)

    monkeypatch.setattr(backend.store, "rotate_key", racing)
    with pytest.raises(VersionConflict, match="nothing was changed"):
        forgetting.rotate(backend, None, forget_before=3, conversations=False, prompt=None)
    assert keyfiles.load_key(WORKSPACE) == old and not keyfiles.pending_key_file(WORKSPACE).exists()
    assert backend.load().text == "- written meanwhile\n" and backend.forgotten() is None


def test_an_unreachable_server_keeps_the_pending_key_for_the_next_try(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap may have landed: the pending key is the only copy of the key that would open it."""
    backend, old = saved(service)
    swap = backend.store.rotate_key

    def lost_reply(plan):  # type: ignore[no-untyped-def]
        swap(plan)
        raise Unavailable("The connection dropped; nothing is known.")

    monkeypatch.setattr(backend.store, "rotate_key", lost_reply)
    with pytest.raises(Unavailable):
        forgetting.rotate(backend, None, forget_before=None, conversations=False, prompt=None)
    assert keyfiles.load_key(WORKSPACE) == old and keyfiles.pending_key_file(WORKSPACE).exists()
    fresh = LocalBackend(service, WORKSPACE, old)
    landed = forgetting.finish_pending(fresh, None, prompt=None)
    assert landed == paths.key_file(WORKSPACE) and keyfiles.load_key(WORKSPACE) != old


def test_a_wrong_passphrase_is_refused_before_anything_is_written(service: MemoryService) -> None:
    backend, old = saved(service, passphrase="correct horse battery")
    assert forgetting.needs_passphrase(WORKSPACE, None)
    with pytest.raises(KeyFileError, match="Wrong passphrase"):
        forgetting.rotate(backend, None, forget_before=None, conversations=False, prompt=lambda _q: "wrong")
    with pytest.raises(KeyFileError, match="none was given"):
        forgetting.rotate(backend, None, forget_before=None, conversations=False, prompt=None)
    assert not keyfiles.pending_key_file(WORKSPACE).exists()
    assert backend.store.get_key_check() == sealing.key_check(old, WORKSPACE)
    forgetting.rotate(backend, None, forget_before=None, conversations=False, prompt=lambda _q: "correct horse battery")
    assert keyfiles.key_is_wrapped(WORKSPACE)  # the new key is wrapped with the same passphrase
    new = keyfiles.load_key(WORKSPACE, prompt=lambda _q: "correct horse battery")
    assert new != old and backend.store.get_key_check() == sealing.key_check(new, WORKSPACE)


def test_a_set_passphrase_is_not_asked_for(service: MemoryService, monkeypatch: pytest.MonkeyPatch) -> None:
    saved(service, passphrase="correct horse battery")
    monkeypatch.setenv("MEMFRAME_PASSPHRASE", "correct horse battery")
    assert not forgetting.needs_passphrase(WORKSPACE, None)
