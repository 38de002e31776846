"""The key check belongs to the workspace's owner (issue 29, item 2).

A member who holds no key, or a key of her own, must not become the one who decides which key is
the workspace's: only the owner writes the check, a member's key is proven against it (or, on an
older workspace with none, against the memory) and never sets it, and an admin resets it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memframe.api import create_app
from memframe.backend.heads import SeenHeads
from memframe.backend.local import LocalBackend
from memframe.core.errors import Forbidden, WrongKey
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from tests.support.remote_kinds import asgi_client

WS = "ws"  # owned by LOCAL_USER (see engine_service)
MEMBER = "bob"


def new_key() -> bytes:
    return secrets.token_bytes(32)


def key_check(key: bytes, workspace_id: str) -> str:
    """The documented key check (migration 0052), computed here so the test names no sealing module."""
    return hmac.new(key, b"memframe key check v1\x00" + workspace_id.encode(), hashlib.sha256).hexdigest()


@pytest.fixture
def svc(engine_service: MemoryService) -> MemoryService:
    engine_service.accounts.add_user(MEMBER)
    engine_service.accounts.add_member(WS, MEMBER)
    return engine_service


def _as(svc: MemoryService, user: str, key: bytes) -> LocalBackend:
    return LocalBackend(svc, WS, key, user=user)


def test_only_the_owner_sets_the_key_check(svc: MemoryService) -> None:
    owner_key, squat = new_key(), new_key()
    with pytest.raises(Forbidden) as err:
        svc.set_key_check(MEMBER, WS, key_check(squat, WS))
    assert "owner" in str(err.value) and "\n" not in str(err.value)
    assert svc.get_key_check(MEMBER, WS) is None, "a refused member wrote nothing"
    svc.set_key_check(LOCAL_USER, WS, key_check(owner_key, WS))
    assert svc.get_key_check(MEMBER, WS) == key_check(owner_key, WS)
    with pytest.raises(WrongKey):  # set once: not even the owner swaps it
        svc.set_key_check(LOCAL_USER, WS, key_check(squat, WS))
    # the member's key is proven against the owner's check
    assert svc.assistant.open_key_session(MEMBER, WS, owner_key).workspace_id == WS
    with pytest.raises(WrongKey):
        svc.assistant.open_key_session(MEMBER, WS, squat)


def test_a_members_client_proves_her_key_and_never_sets_the_check(svc: MemoryService) -> None:
    owner_key = new_key()
    member = _as(svc, MEMBER, owner_key)
    member.seen = SeenHeads(None)
    with pytest.raises(Forbidden):  # nothing to prove against yet: no check, no memory
        member.prove_key()
    _as(svc, LOCAL_USER, owner_key).save("- tea\n", 0)
    member.prove_key()  # an older workspace: the memory proves her key
    assert svc.get_key_check(LOCAL_USER, WS) is None
    stranger = _as(svc, MEMBER, new_key())
    stranger.seen = SeenHeads(None)
    with pytest.raises(Exception) as err:  # a wrong key does not open the memory
        stranger.prove_key()
    assert not isinstance(err.value, Forbidden)
    assert svc.get_key_check(LOCAL_USER, WS) is None


def test_on_an_older_workspace_a_members_key_session_does_not_set_the_check(svc: MemoryService) -> None:
    owner_key = new_key()
    with pytest.raises(Forbidden):  # no check and no memory: nothing proves a member's key
        svc.assistant.open_key_session(MEMBER, WS, new_key())
    _as(svc, LOCAL_USER, owner_key).save("- tea\n", 0)
    with pytest.raises(WrongKey):
        svc.assistant.open_key_session(MEMBER, WS, new_key())
    svc.assistant.open_key_session(MEMBER, WS, owner_key)  # the memory proves it ...
    assert svc.get_key_check(LOCAL_USER, WS) is None  # ... and it sets nothing
    svc.assistant.open_key_session(LOCAL_USER, WS, owner_key)  # the owner's proven key does
    assert svc.get_key_check(LOCAL_USER, WS) == key_check(owner_key, WS)


def test_an_admin_reset_lets_the_owner_set_it_anew(svc: MemoryService) -> None:
    wrong, owner_key = new_key(), new_key()
    svc.set_key_check(LOCAL_USER, WS, key_check(wrong, WS))
    assert svc.reset_key_check(WS) is True
    assert svc.get_key_check(LOCAL_USER, WS) is None
    assert svc.reset_key_check(WS) is False
    svc.assistant.open_key_session(LOCAL_USER, WS, owner_key)
    assert svc.get_key_check(MEMBER, WS) == key_check(owner_key, WS)


@pytest.fixture
def http(svc: MemoryService) -> Iterator[tuple[httpx.Client, dict[str, str]]]:
    tokens = {user: svc.accounts.create_token(user)[1] for user in (LOCAL_USER, MEMBER)}
    with asgi_client(create_app(svc)) as client:
        yield client, tokens


def test_through_the_http_api_a_member_gets_403_and_the_owner_200(
    svc: MemoryService, http: tuple[httpx.Client, dict[str, str]]
) -> None:
    client, tokens = http
    url = f"/api/v1/workspaces/{WS}/key-check"
    squat = {"keyCheck": key_check(new_key(), WS)}
    member, owner = ({"Authorization": f"Bearer {tokens[user]}"} for user in (MEMBER, LOCAL_USER))
    answer = client.put(url, json=squat, headers=member)
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"] == "forbidden" and "owner" in answer.json()["message"]
    assert client.get(url, headers=member).json() == {"keyCheck": None}
    mine = {"keyCheck": key_check(new_key(), WS)}
    answer = client.put(url, json=mine, headers=owner)
    assert answer.status_code == 200 and answer.json() == mine


def test_admin_reset_key_check_says_what_it_did_and_what_follows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from memframe.cli import main

    db = str(tmp_path / "team.db")
    assert main(["admin", "user", "add", "alice", "--db", db]) == 0
    assert main(["admin", "workspace", "create", "notes", "--owner", "alice", "--db", db]) == 0
    service = MemoryService(db)
    try:
        service.set_key_check("alice", "notes", key_check(new_key(), "notes"))
    finally:
        service.close()
    capsys.readouterr()
    assert main(["admin", "workspace", "reset-key-check", "notes", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "Removed the key check of workspace 'notes'" in out and "owner's next key session" in out
    assert main(["admin", "workspace", "reset-key-check", "notes", "--db", db]) == 0
    assert "has no key check; nothing was changed" in capsys.readouterr().out
    assert main(["admin", "workspace", "reset-key-check", "nope", "--db", db]) == 1
    assert capsys.readouterr().err == "memframe: There is no workspace 'nope'.\n"


def test_over_http_a_members_init_is_refused_and_her_imported_key_is_proven(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole story through `memframe` against a served workspace: bob cannot squat the check
    before alice's init; alice's init sets it; bob imports alice's key, proven against it."""
    from memframe.cli import main
    from tests.support.remote_kinds import loopback_server

    service = MemoryService(tmp_path / "team.db")
    server = loopback_server()
    url = server.mount(create_app(service))
    try:
        for user in ("alice", "bob"):
            service.accounts.add_user(user)
        service.accounts.create_workspace("notes", "alice")
        service.accounts.add_member("notes", "bob")
        tokens = {user: tmp_path / f"{user}.token" for user in ("alice", "bob")}
        for user, path in tokens.items():
            path.write_text(service.accounts.create_token(user)[1] + "\n", encoding="utf-8")
        monkeypatch.setenv("MEMFRAME_EXPORT_PASSPHRASE", "a passphrase long enough to pass")
        common = ["--remote", url, "--workspace", "notes"]
        capsys.readouterr()

        assert main(["init", *common, "--token-file", str(tokens["bob"])]) == 1
        err = capsys.readouterr().err
        assert (
            err.startswith("memframe: Only the owner of workspace 'notes' sets its key check") and err.count("\n") == 1
        )
        assert service.get_key_check("alice", "notes") is None

        assert main(["init", *common, "--token-file", str(tokens["alice"])]) == 0
        check = service.get_key_check("alice", "notes")
        assert check is not None
        service.reset_key_check("notes")  # an init over a key already here must not set a lost key's check
        assert main(["init", *common, "--token-file", str(tokens["alice"])]) == 1
        assert "already exists" in capsys.readouterr().err
        assert service.get_key_check("alice", "notes") is None
        service.set_key_check("alice", "notes", check)
        exported = tmp_path / "notes.mfkey"
        assert main(["key", "export", str(exported), *common, "--token-file", str(tokens["alice"])]) == 0
        from memframe import paths

        paths.key_file("notes", url).unlink()  # bob's machine has no key of its own
        capsys.readouterr()
        assert main(["key", "import", str(exported), *common, "--token-file", str(tokens["bob"])]) == 0, (
            capsys.readouterr().err
        )
    finally:
        server.unmount(url)
        service.close()
