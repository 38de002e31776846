"""Fuzzing: tampered, truncated, re-nonced, spliced and moved ciphertexts are refused, never misread.

`sealing.open_sealed` is the one place every stored text is opened (the frame,
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

from memframe import sealing
from memframe.backend.local import LocalBackend
from memframe.core.edits import MemoryChange
from memframe.core.errors import DecryptionFailed
from memframe.core.paths import proposal_path, transcript_path
from memframe.core.types import MEMORY_PATH, Mode, RecallStatus
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.service.documents import UNREADABLE_NOTE
from tests.conftest import FakeClock
from tests.reliability.support import SOAK, dump, is_postgres, raw, record_figures, sized

pytestmark = pytest.mark.fuzz

TAMPERINGS = sized(10_000, 100_000)
PER_EXAMPLE = 20
STORED_TAMPERINGS = sized(200, 1_000)

KEY_WS, KEY_WS2 = sealing.new_key(), sealing.new_key()
PROPOSAL = "prop_0123456789abcdef"
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
    transcript_path("conv-1"),
    proposal_path(PROPOSAL),
]
TEXTS = ["", "x", "# Memory\n- prefers green tea\n", "長い記憶 " * 120]

#: Where a text is opened: ("file", ws, path, version, legacy), ("message", ws, conversation, seq,
#: role, legacy) or ("proposal", ws, proposal id). `legacy` admits a v1 text there.
Place = tuple[Any, ...]


@dataclass(frozen=True)
class Sealed:
    key: bytes
    blob: bytes
    place: Place


def open_at(key: bytes, blob: bytes, place: Place) -> str:
    """Open `blob` at `place` through the one public opener of that kind of place."""
    if place[0] == "file":
        _, ws, path, version, legacy = place
        return sealing.open_sealed(key, blob, workspace_id=ws, path=path, version=version, legacy=legacy)
    if place[0] == "message":
        _, ws, cid, seq, role, legacy = place
        return sealing.open_message(key, blob, workspace_id=ws, conversation_id=cid, seq=seq, role=role, legacy=legacy)
    _, ws, pid = place
    return sealing.open_proposal(key, blob, workspace_id=ws, proposal_id=pid, legacy_path=proposal_path(pid))


def _v2_place(place: Place) -> bytes:
    if place[0] == "file":
        return sealing.file_place(place[1], place[2], place[3])
    if place[0] == "message":
        return sealing.transcript_place(place[1], place[2], place[3], place[4])
    return sealing.proposal_place(place[1], place[2])


def _v1_ad(place: Place) -> bytes | None:
    if place[0] == "file":
        return sealing.associated_data(place[1], place[2]) if place[4] else None
    if place[0] == "message":
        return sealing.associated_data(place[1], transcript_path(place[2])) if place[5] else None
    return sealing.associated_data(place[1], proposal_path(place[2]))


def _genuine() -> list[Sealed]:
    out = []
    for ws in ("ws", "ws2"):
        for key in (KEY_WS, KEY_WS2):
            for text in TEXTS:
                previous = None
                for version in (1, 2, 3):  # a chain of three memory versions
                    blob = sealing.seal(
                        key, text, workspace_id=ws, path=MEMORY_PATH, version=version, previous=previous
                    )
                    out.append(Sealed(key, blob, ("file", ws, MEMORY_PATH, version, False)))
                    previous = blob
                note = sealing.seal(key, text, workspace_id=ws, path="notes/plan.md", version=1)
                out.append(Sealed(key, note, ("file", ws, "notes/plan.md", 1, False)))
                for path in (MEMORY_PATH, "notes/plan.md"):  # texts sealed before v2, where they are due
                    old = sealing.seal_v1(key, text, workspace_id=ws, path=path)
                    out.append(Sealed(key, old, ("file", ws, path, 1, True)))
                for seq, role in ((1, "user"), (2, "assistant")):
                    message = sealing.seal_message(
                        key, text, workspace_id=ws, conversation_id="conv-1", seq=seq, role=role
                    )
                    out.append(Sealed(key, message, ("message", ws, "conv-1", seq, role, False)))
                proposal = sealing.seal_proposal(key, text, workspace_id=ws, proposal_id=PROPOSAL)
                out.append(Sealed(key, proposal, ("proposal", ws, PROPOSAL)))
    return out


GENUINE = _genuine()
_BY_BLOB: dict[bytes, list[Sealed]] = {}
for _g in GENUINE:
    _BY_BLOB.setdefault(_g.blob, []).append(_g)


def really_opens(key: bytes, blob: bytes, place: Place) -> bool:
    """True only for an untampered text at a place it was sealed for (a v1 one binds no version)."""
    for g in _BY_BLOB.get(blob, []):
        if g.key != key:
            continue
        if sealing.header(blob) is not None and _v2_place(place) == _v2_place(g.place):
            return True
        if sealing.header(blob) is None and _v1_ad(place) is not None and _v1_ad(place) == _v1_ad(g.place):
            return True
    return False


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
    "another version",
    "another chain link",
    "old format where the new is due",
    "another place's ciphertext",
    "wrong key",
    "random bytes",
]
# Strategies built once: building them inside every draw costs more than the decryption itself.
_KIND = st.sampled_from(KINDS)
_GENUINE = st.sampled_from(GENUINE)
_V2_FILES = st.sampled_from([g for g in GENUINE if g.place[0] == "file" and not g.place[4]])
_V1 = st.sampled_from([g for g in GENUINE if g.place[0] == "file" and g.place[4]])
_OFFSET = st.integers(0, 2**16)  # taken modulo the ciphertext's length
_BYTE = st.integers(1, 255)
_BITS = st.lists(_OFFSET, min_size=1, max_size=4)
_TAIL = st.binary(min_size=1, max_size=64)
_NONCE = st.binary(min_size=sealing.NONCE_BYTES, max_size=sealing.NONCE_BYTES)
_WORKSPACE = st.sampled_from(["ws", "ws2", "WS", "ws ", "w"]) | names
_PATH = st.sampled_from([MEMORY_PATH, "notes/plan.md", *SPELLINGS]) | names
_VERSION = st.integers(0, 5)
_ROLE = st.sampled_from(["user", "assistant", "system"])
_CONVERSATION = st.sampled_from(["conv-1", "conv-2", "plan.md"]) | names
_ANY_PLACE = st.one_of(
    st.tuples(st.just("file"), _WORKSPACE, _PATH, _VERSION, st.booleans()),
    st.tuples(st.just("message"), _WORKSPACE, _CONVERSATION, _VERSION, _ROLE, st.booleans()),
    st.tuples(st.just("proposal"), _WORKSPACE, st.sampled_from([PROPOSAL, "prop_x"]) | names),
)
_ELSEWHERE = st.sampled_from(GENUINE)
_KEY = st.sampled_from([KEY_WS, KEY_WS2, bytes(32), b"\xff" * 32]) | st.binary(min_size=32, max_size=32)
_RANDOM = st.binary(max_size=300) | st.binary(min_size=4, max_size=300).map(lambda b: sealing.MAGIC + b)


@st.composite
def tampering(draw: st.DrawFn) -> tuple[str, Sealed] | None:
    """One altered (key, blob, place); None in the rare draw that changed nothing."""
    kind = draw(_KIND)
    g = draw(
        _V2_FILES if kind in ("another version", "another chain link") else _V1 if kind.startswith("old") else _GENUINE
    )
    key, blob, place = g.key, g.blob, g.place
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
        at = sealing.HEADER_BYTES if sealing.header(blob) is not None else 0
        blob = blob[:at] + draw(_NONCE) + blob[at + sealing.NONCE_BYTES :]
    elif kind == "splice two ciphertexts":
        other = draw(_GENUINE)
        cut = draw(_OFFSET) % (min(n, len(other.blob)) + 1)
        blob = blob[:cut] + other.blob[cut:]
    elif kind == "another place":
        place = draw(_ANY_PLACE)
    elif kind == "another version":  # a row copied, moved or reordered within its document
        place = (*place[:3], draw(_VERSION), draw(st.booleans()))
    elif kind == "another chain link":  # the header names another predecessor or chain start
        other = draw(_V2_FILES)
        cut = draw(st.sampled_from([4, 8, 12]))
        blob = blob[:cut] + other.blob[cut : sealing.HEADER_BYTES] + blob[sealing.HEADER_BYTES :]
    elif kind == "old format where the new is due":
        place = (*place[:4], False)
    elif kind == "another place's ciphertext":
        blob = draw(_ELSEWHERE).blob
    elif kind == "wrong key":
        key = draw(_KEY)
    else:
        blob = draw(_RANDOM)
    if really_opens(key, blob, place):
        return None  # not a tampering: this exact text really opens there
    return kind, Sealed(key, blob, place)


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
                text = open_at(t.key, t.blob, t.place)
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
        blob = sealing.seal(key, "a note\n", workspace_id=backend.workspace_id, path="notes/plan.md", version=1)
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
        how=st.sampled_from(["flip", "truncate", "extend", "nonce", "copied", "foreign"]),
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
            at = sealing.HEADER_BYTES
            blob = blob[:at] + sealing.new_key()[: sealing.NONCE_BYTES] + blob[at + sealing.NONCE_BYTES :]
        elif how == "copied":  # another version's genuine ciphertext of the same document
            blob = originals[data.draw(st.sampled_from([v for v in originals if v != version]))]
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
                # the key is proven by the workspace's key check, not by the (altered) memory
                store.service.assistant.revoke_key_session(
                    LOCAL_USER, store.service.assistant.open_key_session(LOCAL_USER, "ws", KEY_WS).id
                )
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
    from schemathesis import GenerationMode

    name = f"{operation.method.upper()} {operation.path}"
    # Valid cases reach the routes' logic; invalid ones (the schema forbids them) must be refused.
    cases = st.one_of(operation.as_strategy(mode) for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE))

    # Derandomized at CI size, so a pass or a failure is the same on every run; soak explores afresh.
    @settings(
        max_examples=SCHEMATHESIS_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=not SOAK,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases, use_real=st.booleans())
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


def test_every_route_survives_schemathesis(store_at: Callable[[str], str]) -> None:
    """Schema-driven requests to every operation the app publishes: no 5xx, and every answer conforms,
    on each engine (PostgreSQL refuses values SQLite takes, a NUL in a text: both must answer alike).

    Half the generated path parameters are swapped for real ones (the workspace, a conversation,
    a key session, a proposal) so requests get past "not found" into the routes' logic; people's
    routes carry a member's token and automation routes a live delivery credential.
    """
    schemathesis = pytest.importorskip("schemathesis")
    from schemathesis.checks import (
        content_type_conformance,
        negative_data_rejection,
        not_a_server_error,
        response_headers_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    from memframe.api import create_app

    checks = [
        not_a_server_error,
        negative_data_rejection,  # what the schema forbids (a string for a boolean, say) is refused
        status_code_conformance,
        content_type_conformance,
        response_headers_conformance,
        response_schema_conformance,
    ]
    service = MemoryService(store_at("api.db"))
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


def test_one_undecryptable_note_is_skipped_by_search_with_a_note(store: Store) -> None:
    """Issue 17: a damaged note no longer makes the Assistant's whole search fail."""
    a = store.service.assistant
    turn = a.admit(LOCAL_USER, "ws", "conv", idempotency_key="s1", key_session_id=store.session, memory_state=None)
    a.put_document("ws", turn.credential, "notes/good.md", "the plan is good\n", 0)
    with raw(store.path) as conn:
        conn.execute(
            "UPDATE file_versions SET ciphertext = ? WHERE workspace_id = 'ws' AND path = 'notes/plan.md'",
            (b"\x00" * 40,),
        )
    hits = a.search_documents("ws", turn.credential, "plan")
    assert sorted((h.path, h.snippet) for h in hits) == [
        ("notes/good.md", "the plan is good"),
        ("notes/plan.md", UNREADABLE_NOTE),
    ]
