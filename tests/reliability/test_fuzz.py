"""Fuzzing: tampered, truncated, re-nonced, spliced and moved ciphertexts are refused, never misread.

`crypto.open_sealed` is the one place every stored text is opened (the frame,
the CLI, recall, capture, proposals and the transcript all go through it). Ten
thousand Hypothesis-made tamperings — bit flips anywhere (nonce, body, tag),
truncation, extension, insertion, a new nonce, splices of two ciphertexts, a
wrong key, random bytes, and genuine ciphertexts opened under another
workspace or path (including other spellings of the memory path) — must each
raise `DecryptionFailed`: no other exception, and never text.

A smaller number go through the stored database: the blob of a revision is
altered or replaced in SQLite, and every reader of it (load, read_revision,
undo, opening a key session, recall, capture, the CLI) fails cleanly and
writes nothing.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memframe import crypto
from memframe.backend.local import LocalBackend
from memframe.core.edits import MemoryChange
from memframe.core.errors import DecryptionFailed
from memframe.core.paths import proposal_path, transcript_path
from memframe.core.types import MEMORY_PATH, Mode, RecallStatus
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from tests.conftest import FakeClock
from tests.reliability.support import SOAK, dump, is_postgres, raw, record_figures, sized

pytestmark = pytest.mark.fuzz

TAMPERINGS = sized(10_000, 100_000)
PER_EXAMPLE = 20
STORED_TAMPERINGS = sized(200, 1_000)

KEY_WS, KEY_WS2 = crypto.new_key(), crypto.new_key()
PLACES = [
    ("ws", MEMORY_PATH),
    ("ws", "notes/plan.md"),
    ("ws", proposal_path("prop_0123456789abcdef")),
    ("ws", transcript_path("conv-1")),
    ("ws2", MEMORY_PATH),
    ("ws2", "notes/plan.md"),
]
#: Other spellings a confused or malicious caller might use for the same place.
SPELLINGS = [
    "./.zudotext/memory/MEMORY.md",
    ".zudotext/memory/memory.md",
    ".ZUDOTEXT/memory/MEMORY.md",
    ".zudotext//memory/MEMORY.md",
    ".zudotext/memory/MEMORY.md/",
    "/.zudotext/memory/MEMORY.md",
    ".zudotext/memory/MEMORY.md ",
    "．zudotext/memory/MEMORY.md",
    "",
]
TEXTS = ["", "x", "# Memory\n- prefers green tea\n", "長い記憶 " * 120]


@dataclass(frozen=True)
class Sealed:
    key: bytes
    blob: bytes
    workspace: str
    path: str


def _genuine() -> list[Sealed]:
    out = []
    for ws, path in PLACES:
        for key in (KEY_WS if ws == "ws" else KEY_WS2, KEY_WS2 if ws == "ws" else KEY_WS):
            for text in TEXTS:
                out.append(Sealed(key, crypto.seal(key, text, workspace_id=ws, path=path), ws, path))
    return out


GENUINE = _genuine()
OPENS = {(g.key, g.blob, crypto.associated_data(g.workspace, g.path)) for g in GENUINE}
names = st.text(alphabet=st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=40)


KINDS = [
    "flip bits",
    "replace a byte",
    "truncate",
    "extend",
    "insert",
    "delete a range",
    "new nonce",
    "splice two ciphertexts",
    "another place",
    "another place's ciphertext",
    "wrong key",
    "random bytes",
]
# Strategies built once: building them inside every draw costs more than the decryption itself.
_KIND = st.sampled_from(KINDS)
_GENUINE = st.sampled_from(GENUINE)
_OFFSET = st.integers(0, 2**16)  # taken modulo the ciphertext's length
_BYTE = st.integers(1, 255)
_BITS = st.lists(_OFFSET, min_size=1, max_size=4)
_TAIL = st.binary(min_size=1, max_size=64)
_NONCE = st.binary(min_size=crypto.NONCE_BYTES, max_size=crypto.NONCE_BYTES)
_WORKSPACE = st.sampled_from(["ws", "ws2", "WS", "ws ", "w"]) | names
_PATH = st.sampled_from([p for _, p in PLACES] + SPELLINGS) | names
_ELSEWHERE = {place: st.sampled_from([o.blob for o in GENUINE if (o.workspace, o.path) != place]) for place in PLACES}
_KEY = st.sampled_from([KEY_WS, KEY_WS2, bytes(32), b"\xff" * 32]) | st.binary(min_size=32, max_size=32)
_RANDOM = st.binary(max_size=300)


@st.composite
def tampering(draw: st.DrawFn) -> tuple[str, Sealed] | None:
    """One altered (key, blob, workspace, path); None in the rare draw that changed nothing."""
    g = draw(_GENUINE)
    kind = draw(_KIND)
    key, blob, ws, path = g.key, g.blob, g.workspace, g.path
    n = len(blob)
    if kind == "flip bits":
        data = bytearray(blob)
        for bit in {b % (n * 8) for b in draw(_BITS)}:
            data[bit // 8] ^= 1 << (bit % 8)
        blob = bytes(data)
    elif kind == "replace a byte":
        i = draw(_OFFSET) % n
        blob = blob[:i] + bytes([(blob[i] + draw(_BYTE)) % 256]) + blob[i + 1 :]
    elif kind == "truncate":
        blob = blob[: draw(_OFFSET) % n]
    elif kind == "extend":
        blob = blob + draw(_TAIL)
    elif kind == "insert":
        i = draw(_OFFSET) % (n + 1)
        blob = blob[:i] + draw(_TAIL) + blob[i:]
    elif kind == "delete a range":
        i = draw(_OFFSET) % n
        blob = blob[:i] + blob[i + 1 + draw(_OFFSET) % (n - i) :]
    elif kind == "new nonce":
        blob = draw(_NONCE) + blob[crypto.NONCE_BYTES :]
    elif kind == "splice two ciphertexts":
        other = draw(_GENUINE)
        cut = draw(_OFFSET) % (min(n, len(other.blob)) + 1)
        blob = blob[:cut] + other.blob[cut:]
    elif kind == "another place":
        ws, path = draw(_WORKSPACE), draw(_PATH)
    elif kind == "another place's ciphertext":
        blob = draw(_ELSEWHERE[(ws, path)])
    elif kind == "wrong key":
        key = draw(_KEY)
    else:
        blob = draw(_RANDOM)
    if (key, blob, crypto.associated_data(ws, path)) in OPENS:
        return None  # not a tampering: this exact triple really opens
    return kind, Sealed(key, blob, ws, path)


def test_ten_thousand_tampered_ciphertexts_are_all_refused() -> None:
    tried: dict[str, int] = {}

    @settings(
        max_examples=TAMPERINGS // PER_EXAMPLE + TAMPERINGS // PER_EXAMPLE // 20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(st.lists(tampering(), min_size=PER_EXAMPLE, max_size=PER_EXAMPLE))
    def refused(cases: list[tuple[str, Sealed] | None]) -> None:
        for case in cases:
            if case is None:
                continue
            kind, t = case
            try:
                text = crypto.open_sealed(t.key, t.blob, workspace_id=t.workspace, path=t.path)
            except DecryptionFailed as exc:
                message = str(exc)
                assert len(t.blob) < 8 or t.blob.hex() not in message, "the error shows the ciphertext"
                assert t.key.hex() not in message, "the error shows the key"
            else:
                raise AssertionError(f"{kind}: a tampered ciphertext opened as {text[:40]!r}")
            tried[kind] = tried.get(kind, 0) + 1

    refused()
    total = sum(tried.values())
    record_figures("fuzz-ciphertext", tampered=total, **tried)
    assert total >= TAMPERINGS, f"only {total} tamperings were tried"
    assert len(tried) == len(KINDS), f"some kinds of tampering were never tried: {sorted(tried)}"


# --- through the stored database -------------------------------------------------------------------


@dataclass
class Store:
    service: MemoryService
    clock: FakeClock
    person: LocalBackend
    other: LocalBackend
    path: str | Path
    session: str


@pytest.fixture
def store(store_at: Callable[[str], str]) -> Iterator[Store]:
    clock = FakeClock()
    target = store_at("fuzz.db")
    service = MemoryService(target, clock=clock)
    service.accounts.add_user(LOCAL_USER)
    service.accounts.create_workspace("ws", LOCAL_USER)
    service.accounts.create_workspace("ws2", LOCAL_USER)
    person, other = LocalBackend(service, "ws", KEY_WS), LocalBackend(service, "ws2", KEY_WS2)
    for i in range(3):
        person.save(f"# Memory\n- revision {i} of ws\n", i)
        other.save(f"# Memory\n- revision {i} of ws2\n", i)
    for backend, key in ((person, KEY_WS), (other, KEY_WS2)):
        blob = crypto.seal(key, "a note\n", workspace_id=backend.workspace_id, path="notes/plan.md")
        service.put_file(LOCAL_USER, backend.workspace_id, "notes/plan.md", blob, 0)
    person.set_ai(True)
    person.set_policy(Mode.AUTO, 0)
    session = service.assistant.open_key_session(LOCAL_USER, "ws", KEY_WS).id
    yield Store(service, clock, person, other, target, session)
    service.close()


def _blobs(path: str | Path) -> list[tuple[str, str, int, bytes]]:
    with raw(path) as conn:
        return [
            (ws, p, int(v), bytes(b))
            for ws, p, v, b in conn.execute(
                "SELECT workspace_id, path, version, ciphertext FROM file_versions WHERE ciphertext IS NOT NULL"
            )
        ]


def _put_blob(path: str | Path, version: int, blob: bytes) -> None:
    with raw(path) as conn:
        conn.execute(
            "UPDATE file_versions SET ciphertext = ? WHERE workspace_id = 'ws' AND path = ? AND version = ?",
            (blob, MEMORY_PATH, version),
        )


def test_tampered_stored_revisions_fail_cleanly_everywhere_they_are_read(store: Store) -> None:
    originals = {v: b for ws, p, v, b in _blobs(store.path) if (ws, p) == ("ws", MEMORY_PATH)}
    foreign = [b for ws, p, v, b in _blobs(store.path) if (ws, p) != ("ws", MEMORY_PATH)]
    head = max(originals)
    counts: dict[str, int] = {}

    # PostgreSQL pays a connection and a whole-database dump per example: a quarter of the examples.
    examples = STORED_TAMPERINGS if not is_postgres(store.path) else max(50, STORED_TAMPERINGS // 4)

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        version=st.sampled_from(sorted(originals)),
        how=st.sampled_from(["flip", "truncate", "extend", "nonce", "foreign"]),
        data=st.data(),
    )
    def refused(version: int, how: str, data: st.DataObject) -> None:
        blob = originals[version]
        if how == "flip":
            i = data.draw(st.integers(0, len(blob) - 1))
            blob = blob[:i] + bytes([blob[i] ^ data.draw(st.integers(1, 255))]) + blob[i + 1 :]
        elif how == "truncate":
            blob = blob[: data.draw(st.integers(0, len(blob) - 1))]
        elif how == "extend":
            blob = blob + data.draw(st.binary(min_size=1, max_size=32))
        elif how == "nonce":
            blob = crypto.new_key()[: crypto.NONCE_BYTES] + blob[crypto.NONCE_BYTES :]
        else:  # another workspace's memory, or a note: genuine ciphertext from the wrong place
            blob = data.draw(st.sampled_from(foreign))
        _put_blob(store.path, version, blob)
        try:
            before = dump(store.path)
            with pytest.raises(DecryptionFailed):
                store.person.read_revision(version)
            with pytest.raises(DecryptionFailed):
                store.person.undo(version, head)
            if version == head:
                with pytest.raises(DecryptionFailed):
                    store.person.load()
                with pytest.raises(DecryptionFailed):
                    store.service.assistant.open_key_session(LOCAL_USER, "ws", KEY_WS)
                store.clock.advance(1)
                a = store.service.assistant.admit(
                    LOCAL_USER,
                    "ws",
                    "conv",
                    idempotency_key=f"t{store.clock.now}",
                    key_session_id=store.session,
                    memory_state=None,
                )
                recalled = store.service.assistant.recall("ws", a.credential)
                assert (recalled.status, recalled.text) == (RecallStatus.UNAVAILABLE, None)
                store.service.db.flush()  # recall's own receipt lands before the baseline is taken
                before = dump(store.path)
                with pytest.raises(DecryptionFailed):
                    store.service.assistant.commit_capture(
                        "ws",
                        a.credential,
                        idempotency_key=f"memory:{a.id}",
                        key_session_id=store.session,
                        changes=[MemoryChange("add", "- never")],
                        expected_version=head,
                    )
            assert dump(store.path) == before, "a refused read or write changed the database"
            assert [r.version for r in store.person.history()] == sorted(originals, reverse=True)
        finally:
            _put_blob(store.path, version, originals[version])
        counts[how] = counts.get(how, 0) + 1

    refused()
    record_figures("fuzz-stored", tampered=sum(counts.values()), **counts)
    assert store.person.load().text == "# Memory\n- revision 2 of ws\n"


def test_the_cli_reports_a_tampered_memory_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from memframe import paths
    from memframe.cli import EXIT_ERROR, main

    assert main(["init"]) == 0
    text = tmp_path / "m.md"
    text.write_text("# Memory\n- the spare key is under the blue pot\n", encoding="utf-8")
    assert main(["save", str(text), "--base", "0"]) == 0
    with raw(paths.local_database()) as conn:
        (blob,) = conn.execute("SELECT ciphertext FROM file_versions").fetchone()
        conn.execute("UPDATE file_versions SET ciphertext = ?", (bytes(blob)[:-1] + bytes([blob[-1] ^ 1]),))
    capsys.readouterr()
    for argv in (["show"], ["history", "-p"], ["undo", "1", "--base", "1"]):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == EXIT_ERROR, (argv, code, out, err)
        assert err.startswith("memframe: ") and err.count("\n") == 1 and "Traceback" not in err, err
        assert "blue pot" not in out + err and base64.b64encode(bytes(blob)).decode()[:16] not in err


# --- the served OpenAPI, under Schemathesis ---------------------------------------------------------

SCHEMATHESIS_EXAMPLES = sized(6, 50)  # per operation


def fuzz_operation(
    operation: Any,
    headers: dict[str, str],
    real: dict[str, str],
    checks: list[Any],
    failures: dict[str, list[str]],
    statuses: dict[int, int],
) -> None:
    """Run one operation's schema-generated cases; collect failed checks instead of stopping."""
    name = f"{operation.method.upper()} {operation.path}"

    # Derandomized at CI size, so a pass or a failure is the same on every run; soak explores afresh.
    @settings(
        max_examples=SCHEMATHESIS_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=not SOAK,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(), use_real=st.booleans())
    def call(case: Any, use_real: bool) -> None:
        if use_real and case.path_parameters:
            for param in case.path_parameters:
                if param in real:
                    case.path_parameters[param] = real[param]
        try:
            response = case.call_and_validate(headers=headers, checks=checks)
        except Exception as exc:  # a failed check: collect it, and go on with the other routes
            failures.setdefault(name, []).append(f"{type(exc).__name__}: {str(exc)[:400]}")
            return
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

    call()


def test_every_route_survives_schemathesis(fast_tmp: Path) -> None:
    """Schema-driven requests to every operation the app publishes: no 5xx, and every answer conforms.

    Half the generated path parameters are swapped for real ones (the workspace, a conversation,
    a key session, a proposal) so requests get past "not found" into the routes' logic; people's
    routes carry a member's token and automation routes a live delivery credential.
    """
    schemathesis = pytest.importorskip("schemathesis")
    from schemathesis.checks import (
        content_type_conformance,
        not_a_server_error,
        response_headers_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    from memframe.api import create_app

    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_headers_conformance,
        response_schema_conformance,
    ]
    service = MemoryService(fast_tmp / "api.db")
    try:
        service.accounts.add_user("olivia")
        service.accounts.create_workspace("ws", "olivia")
        token = service.accounts.create_token("olivia")[1]
        person = LocalBackend(service, "ws", KEY_WS, user="olivia")
        person.save("# Memory\n- prefers green tea\n", 0)
        person.set_ai(True)
        person.set_policy(Mode.AUTO, 0)
        session = service.assistant.open_key_session("olivia", "ws", KEY_WS).id
        turn = service.assistant.admit(
            "olivia", "ws", "conv", idempotency_key="s1", key_session_id=session, memory_state=None
        )
        proposal = service.assistant.propose(
            "ws", turn.credential, changes=[MemoryChange("add", "- y")], base_version=1, reason="read_only"
        )
        real = {
            "workspace_id": "ws",
            "conversation_id": "conv",
            "session_id": session,
            "proposal_id": proposal.id,
            "path": "notes/plan.md",
        }
        app = create_app(service)
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) == sum(len(item) for item in app.openapi()["paths"].values()), (
            "Schemathesis does not see every operation"
        )
        failures: dict[str, list[str]] = {}
        statuses: dict[int, int] = {}

        for operation in operations:
            bearer = turn.credential if operation.path.startswith("/api/v1/automation/workspaces") else token
            fuzz_operation(operation, {"Authorization": f"Bearer {bearer}"}, real, checks, failures, statuses)
        record_figures(
            "fuzz-schemathesis",
            operations=len(operations),
            requests=sum(statuses.values()) + sum(len(v) for v in failures.values()),
            statuses={str(k): v for k, v in sorted(statuses.items())},
            failures=sum(len(v) for v in failures.values()),
        )
        assert not failures, "\n".join(f"{op}: {msgs[0]}" for op, msgs in failures.items())
        assert all(status < 500 for status in statuses)
        assert statuses.get(200, 0) > 0, "no request ever got past validation; the fuzzing was shallow"
    finally:
        service.close()
