"""A wrong server URL says so (issue 29, item 4).

`memframe show --remote http://localhost:PORT` against a server on 127.0.0.1, a mistyped port, or
`--remote notaurl` used to answer "No key for workspace ... Run 'memframe init'". The key is now
found by the server's identity, a key filed under an older spelling is adopted, and when there is
no key the server is reached first, so a wrong address is named with what failed.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memframe import paths
from memframe.api import create_app
from memframe.cli import EXIT_ERROR, main
from memframe.service import MemoryService
from tests.support.remote_kinds import loopback_server


@dataclass
class Served:
    url: str  # as the server was first named: http://127.0.0.1:PORT/tN
    port: int
    prefix: str


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    service = MemoryService(tmp_path / "team.db")
    service.accounts.add_user("alice")
    service.accounts.create_workspace("notes", "alice")
    monkeypatch.setenv("MEMFRAME_TOKEN", service.accounts.create_token("alice")[1])
    monkeypatch.setenv("MEMFRAME_WORKSPACE", "notes")
    server = loopback_server()
    url = server.mount(create_app(service))
    yield Served(url, server.port, url.rsplit("/", 1)[-1])
    server.unmount(url)
    service.close()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    assert err.startswith("memframe: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert "No key" not in err or "server at" in err
    return err


@pytest.mark.parametrize(
    ("spelled", "same"),
    [
        ("http://127.0.0.1:8765", "http://127.0.0.1:8765"),
        ("http://localhost:8765/", "http://127.0.0.1:8765"),
        ("HTTP://LocalHost:8765", "http://127.0.0.1:8765"),
        ("http://[::1]:8765", "http://127.0.0.1:8765"),
        ("http://someone:pw@127.0.0.1:8765/", "http://127.0.0.1:8765"),
        ("https://Example.com:443/mf/", "https://example.com/mf"),
        ("http://example.com:80", "http://example.com"),
    ],
)
def test_one_server_has_one_identity_and_one_key_folder(spelled: str, same: str) -> None:
    assert paths.server_identity(spelled) == same
    assert paths.key_file("notes", spelled) == paths.key_file("notes", same)


def test_the_usual_spelling_keeps_the_key_folder_it_always_had() -> None:
    url = "http://127.0.0.1:8765"
    assert paths.key_scope(url) == paths.key_scope(url, as_spelled=True) == "127-0-0-1-8765-72b0e86b"


def test_localhost_and_a_trailing_slash_find_the_key_made_for_127_0_0_1(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "init", "--remote", served.url)[0] == 0
    assert run(capsys, "mode", "--remote", served.url)[0] == 0
    code, out, err = run(capsys, "show", "--remote", f"http://localhost:{served.port}/{served.prefix}/")
    assert code == 0 and "workspace notes" in out, err


def test_a_mistyped_port_says_the_server_cannot_be_reached(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "init", "--remote", served.url)[0] == 0
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    wrong = f"http://127.0.0.1:{port}/{served.prefix}"
    code, _, err = run(capsys, "show", "--remote", wrong)
    assert code == EXIT_ERROR
    assert _one_line(err).startswith(f"memframe: Cannot reach the memory server at {wrong} ("), err


def test_not_a_url_says_so(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "show", "--remote", "notaurl")
    assert code == EXIT_ERROR
    assert _one_line(err) == "memframe: 'notaurl' is not an http:// or https:// URL of a memframe server.\n"


def test_an_address_with_no_memframe_api_says_so(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "show", "--remote", served.url + "/oops")
    assert code == EXIT_ERROR and f"The server at {served.url}/oops says: There is no API route" in _one_line(err)
    assert "is the server URL right?" in err


def test_no_key_names_the_server_and_the_step_that_works(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "show", "--remote", served.url)
    assert code == EXIT_ERROR and f"server at {served.url}" in _one_line(err) and "owner runs 'memframe init'" in err
    assert run(capsys, "init", "--remote", served.url)[0] == 0
    key = paths.key_file("notes", served.url)
    hidden = paths.home() / "keys" / "elsewhere"
    hidden.mkdir()
    shutil.move(key, hidden / key.name)  # a key of "notes" filed for some other address
    code, _, err = run(capsys, "show", "--remote", served.url)
    assert code == EXIT_ERROR and "'memframe key import'" in _one_line(err) and "memframe init" not in err
    assert "exists for another server address (elsewhere" in err


def test_a_workspace_the_token_cannot_reach_names_the_server(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "show", "--remote", served.url, "--workspace", "other")
    assert code == EXIT_ERROR and f"The server at {served.url} has no workspace 'other'" in _one_line(err)


def test_a_key_filed_under_an_older_spelling_is_adopted(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    spelled = f"http://localhost:{served.port}/{served.prefix}"
    assert run(capsys, "init", "--remote", served.url)[0] == 0
    text = paths.home().parent / "m.md"
    text.write_text("- tea\n", encoding="utf-8")
    assert run(capsys, "save", str(text), "--base", "0", "--remote", served.url)[0] == 0  # a seen record
    key = paths.key_file("notes", served.url)
    seen = key.with_name("notes.seen.json")
    old = paths.home() / "keys" / paths.key_scope(spelled, as_spelled=True)
    old.mkdir()
    for path in (key, seen):  # where an older memframe kept them for that spelling
        path.rename(old / path.name)
    code, out, err = run(capsys, "show", "--remote", spelled)
    assert code == 0 and "- tea" in out, err
    assert key.is_file() and seen.is_file() and not (old / key.name).exists()
