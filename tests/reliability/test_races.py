"""Race schedules: the whole policy against a reference model, and concurrent histories checked for linearizability.

(a) `PolicyMachine` drives saves, clears, undos, mode and consent changes, key
    sessions (open, revoke, idle eviction), admissions (new turns, resends,
    newer turns in the same conversation), captures (current, stale and future
    bases, the turn's own key session or another) and recalls, with time moving
    on. A small model predicts every response — which fence promise refuses a
    capture, which recall status a call gets — and after every step the
    versions, clear generation, policy revision, consent and fence rows must
    match it.

(b) 2–8 threads share one service and race saves, Clears, mode changes,
    admissions and captures; every call's invocation and response is recorded
    and the history must be linearizable against the sequential model
    (`linearizability.memframe_step`). Because the model accepts a capture only
    when the fence predicate holds in the model state at its linearization
    point, a linearizable history proves every committed capture satisfied the
    predicate at its commit point, and every refused one did not.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from memframe import sealing
from memframe.backend.local import LocalBackend
from memframe.core.edits import MemoryChange, apply_memory_changes
from memframe.core.errors import (
    AIDisabled,
    CaptureRefused,
    FenceRefused,
    KeySessionUnavailable,
    MemframeError,
    NotFound,
    PolicyConflict,
    VersionConflict,
)
from memframe.core.types import MEMORY_PATH, Mode, Operation, RecallStatus
from memframe.keysessions.store import MAX_SESSIONS_PER_PERSON
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.service.admissions import ADMISSION_SECONDS
from tests.conftest import FakeClock
from tests.reliability.conftest import fast_dir
from tests.reliability.linearizability import Op, State, linearize, memframe_step, replay
from tests.reliability.support import raw, record_figures, sized, store_problems
from tests.support.pg_server import PostgresServer

pytestmark = pytest.mark.race

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)


@dataclass
class ModelAdmission:
    conversation: str
    mode: Mode
    revision: int
    generation: int
    consent: int
    session: str | None
    expires_at: float
    credential: str
    committed: int | None = None
    committed_expected: int | None = None


class PolicyMachine(RuleBasedStateMachine):
    sessions = Bundle("sessions")

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="memframe-race-", dir=fast_dir())
        self.clock = FakeClock()
        self.target = self.database()
        self.service = MemoryService(self.target, clock=self.clock)
        # Idle eviction is its own rule below; nothing else should expire a session.
        self.service.key_sessions.idle_seconds = self.service.key_sessions.lifetime_seconds = 10**9
        self.service.accounts.add_user(LOCAL_USER)
        self.service.accounts.create_workspace("ws", LOCAL_USER)
        self.key = sealing.new_key()
        self.person = LocalBackend(self.service, "ws", self.key)
        self.assistant = self.service.assistant
        self.assistant.set_ai(LOCAL_USER, "ws", True)
        # the reference model
        self.texts: dict[int, str] = {}
        self.ops: dict[int, Operation] = {}
        self.mode, self.revision, self.generation = Mode.READ_ONLY, 0, 0
        self.ai, self.consent = True, 1
        self.live: set[str] = set()
        self.opened: list[str] = []
        self.revoked: set[str] = set()
        self.model: dict[str, ModelAdmission] = {}
        self.slot: dict[str, str] = {}
        self.last_send: dict[str, tuple[str, str]] = {}  # conversation -> (idempotency key, admission)
        self.fence: dict[str, int] = {}
        self.sends = 0

    def database(self) -> str:
        """Where this run's database lives (a PostgreSQL subclass below puts it on the server)."""
        return str(Path(self.dir) / "policy.db")

    def teardown(self) -> None:
        MACHINE_FIGURES["runs"] += 1
        try:
            with raw(self.target) as conn:
                problems = store_problems(conn)
            assert not problems, problems
        finally:
            self.service.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def version(self) -> int:
        return max(self.texts, default=0)

    def _base(self, how: str) -> int:
        return {"current": self.version, "behind": max(0, self.version - 1), "ahead": self.version + 1}[how]

    # Most runs start where the fence has something to judge: Auto, with a key session open.
    @initialize(target=sessions, auto=st.sampled_from([True, True, True, False]))
    def start(self, auto: bool) -> str:
        if auto:
            self.set_mode(Mode.AUTO, stale=False)
        return self.open_key_session()

    # --- people ------------------------------------------------------------------------------

    def _human_write(self, op: Operation, text: str, base: int, do) -> None:  # type: ignore[no-untyped-def]
        try:
            info = do()
        except VersionConflict as exc:
            assert base != self.version, "a write against the current version was refused"
            assert exc.current_version == self.version
            return
        assert base == self.version, "a write against a stale base was accepted"
        assert (info.version, info.operation) == (self.version + 1, op)
        self.texts[info.version], self.ops[info.version] = text, op
        if op is Operation.CLEAR:
            self.generation += 1

    @rule(text=texts, how=st.sampled_from(["current", "current", "behind", "ahead"]))
    def save(self, text: str, how: str) -> None:
        base = self._base(how)
        self._human_write(Operation.SAVE, text, base, lambda: self.person.save(text, base))

    @rule(how=st.sampled_from(["current", "current", "behind"]))
    def clear(self, how: str) -> None:
        base = self._base(how)
        self._human_write(Operation.CLEAR, "", base, lambda: self.person.clear(base))

    @precondition(lambda self: self.version > 0)
    @rule(data=st.data(), how=st.sampled_from(["current", "behind"]))
    def undo(self, data: st.DataObject, how: str) -> None:
        revision = data.draw(st.integers(1, self.version), label="revision")
        base = self._base(how)
        self._human_write(Operation.UNDO, self.texts[revision], base, lambda: self.person.undo(revision, base))

    @rule(mode=st.sampled_from([Mode.AUTO, Mode.AUTO, Mode.READ_ONLY, Mode.OFF]), stale=st.booleans())
    def set_mode(self, mode: Mode, stale: bool) -> None:
        expected = self.revision + 1 if stale else self.revision
        try:
            policy = self.person.set_policy(mode, expected)
        except PolicyConflict as exc:
            assert stale and exc.current_revision == self.revision
            return
        assert not stale
        if mode is not self.mode:
            self.mode, self.revision = mode, self.revision + 1
        assert (policy.mode, policy.revision, policy.clear_generation) == (self.mode, self.revision, self.generation)

    @rule(away=st.sampled_from([Mode.READ_ONLY, Mode.OFF]))
    def mode_away_and_back(self, away: Mode) -> None:
        """A person switches away and back: the same mode, but every earlier admission is retired."""
        back = self.mode
        self.set_mode(away, stale=False)
        self.set_mode(back, stale=False)

    @rule(enabled=st.sampled_from([True, True, False]))
    def set_ai(self, enabled: bool) -> None:
        consent = self.assistant.set_ai(LOCAL_USER, "ws", enabled)
        if enabled is not self.ai:
            self.ai, self.consent = enabled, self.consent + 1
        assert (consent.enabled, consent.revision) == (self.ai, self.consent)

    @rule(target=sessions)
    def open_key_session(self) -> str:
        session = self.assistant.open_key_session(LOCAL_USER, "ws", self.key).id
        self.live.add(session)
        self.opened.append(session)
        # One person holds at most MAX_SESSIONS_PER_PERSON here: opening one more evicts their oldest.
        mine = [x for x in self.opened if x in self.live]
        self.live.difference_update(mine[: max(0, len(mine) - MAX_SESSIONS_PER_PERSON)])
        return session

    @precondition(lambda self: len(self.live) >= 2)  # keep one alive, so turns can still capture
    @rule(session=sessions, how=st.sampled_from(["revoke", "evict"]))
    def end_key_session(self, session: str, how: str) -> None:
        """An explicit revocation (durable row, then the key is forgotten), or idle eviction (no row)."""
        if how == "evict":
            self.service.key_sessions.forget(session)
            self.live.discard(session)
            return
        if session not in self.live:
            with pytest.raises(NotFound):
                self.assistant.revoke_key_session(LOCAL_USER, session)
            return
        self.assistant.revoke_key_session(LOCAL_USER, session)
        self.live.discard(session)
        self.revoked.add(session)

    @rule(seconds=st.sampled_from([1, 60, 300, 600]))
    def time_passes(self, seconds: int) -> None:
        self.clock.advance(seconds)

    # --- turns ---------------------------------------------------------------------------------

    # Turns are what the fence judges, so they get more of the steps than any one human action:
    # Hypothesis picks among rules evenly, and each of these is registered more than once.
    _send: ClassVar[dict[str, Any]] = {
        "conversation": st.sampled_from(["c1", "c2"]),
        "session": sessions,
        "with_session": st.sampled_from([True] * 5 + [False]),  # a send without a key session, sometimes
        "resend": st.booleans(),
    }

    @rule(**_send)
    def send(self, conversation: str, session: str, with_session: bool, resend: bool) -> None:
        self._admit(conversation, session if with_session else None, resend)

    @rule(**_send)
    def send_again(self, conversation: str, session: str, with_session: bool, resend: bool) -> None:
        self._admit(conversation, session if with_session else None, resend)

    def _admit(self, conversation: str, session: str | None, resend: bool) -> None:
        previous = self.last_send.get(conversation) if resend else None
        if previous is None:
            self.sends += 1
            idempotency_key = f"send-{self.sends}"
        else:
            idempotency_key = previous[0]
        call = lambda: self.assistant.admit(  # noqa: E731
            LOCAL_USER, "ws", conversation, idempotency_key=idempotency_key, key_session_id=session, memory_state=None
        )
        if not self.ai:
            with pytest.raises(AIDisabled):
                call()
            return
        dead = session is not None and (session not in self.live or self.service.key_sessions.describe(session) is None)
        if previous is None and dead:
            # Ingress refuses a dead key session before writing anything (issues 17 and 21): no admission,
            # the conversation's credential slot unchanged, so the client may reopen and send again.
            with pytest.raises(KeySessionUnavailable) as refused:
                call()
            assert refused.value.admission_refused
            return
        a = call()
        if previous is not None:
            assert a.id == previous[1], "a resend did not return the original admission"
            return
        assert (a.mode, a.policy_revision, a.clear_generation, a.ai_consent_revision, a.key_session_id) == (
            self.mode,
            self.revision,
            self.generation,
            self.consent,
            session,
        )
        self.model[a.id] = ModelAdmission(
            conversation,
            self.mode,
            self.revision,
            self.generation,
            self.consent,
            session,
            self.clock.now + ADMISSION_SECONDS,
            a.credential,
        )
        self.slot[conversation] = a.id
        self.last_send[conversation] = (idempotency_key, a.id)

    def _pick(self, data: st.DataObject, latest: bool) -> str:
        """Usually a turn that still holds its conversation's credential; sometimes any earlier one."""
        # In creation order, never sorted by the random ids: Hypothesis must replay a choice exactly.
        holding = set(self.slot.values())
        pool = [a for a in self.model if a in holding] if latest else list(self.model)
        return data.draw(st.sampled_from(pool), label="admission")

    def _predict(self, admission: str, m: ModelAdmission, expected: int, presented: str | None) -> tuple[object, ...]:
        if m.committed is not None:  # a replay, or a second logical change in the same turn
            return ("replay", m.committed) if expected == m.committed_expected else ("refused",)
        if presented is None or presented not in self.live:
            return ("no key session",)
        if expected != self.version:
            return ("conflict", self.version)
        holds = (
            self.clock.now < m.expires_at
            and m.mode is Mode.AUTO
            and self.mode is Mode.AUTO
            and self.revision == m.revision
            and self.generation == m.generation
            and self.ai
            and self.consent == m.consent
            and self.slot.get(m.conversation) == admission
            and m.session is not None
            and m.session == presented
            and m.session not in self.revoked
        )
        return ("ok", self.version + 1) if holds else ("fenced",)

    _capture: ClassVar[dict[str, Any]] = {
        "data": st.data(),
        "latest": st.sampled_from([True, True, True, False]),
        "how": st.sampled_from(["current", "current", "current", "behind", "ahead"]),
        "present": st.sampled_from(["own"] * 8 + ["other", "none"]),
    }

    @precondition(lambda self: bool(self.model))
    @rule(**_capture)
    def capture(self, data: st.DataObject, latest: bool, how: str, present: str) -> None:
        self._capture_once(self._pick(data, latest), how, present)

    @precondition(lambda self: bool(self.model))
    @rule(**_capture)
    def capture_again(self, data: st.DataObject, latest: bool, how: str, present: str) -> None:
        self._capture_once(self._pick(data, latest), how, present)

    @precondition(lambda self: bool(self.model))
    @rule(**_capture)
    def capture_once_more(self, data: st.DataObject, latest: bool, how: str, present: str) -> None:
        self._capture_once(self._pick(data, latest), how, present)

    @rule(
        conversation=st.sampled_from(["c1", "c2"]),
        session=sessions,
        how=st.sampled_from(["current", "current", "behind"]),
    )
    def send_and_capture_at_once(self, conversation: str, session: str, how: str) -> None:
        """A turn that remembers straight away, before anything else can change."""
        before = set(self.model)
        self._admit(conversation, session, resend=False)
        for admission in set(self.model) - before:
            self._capture_once(admission, how, "own")

    def _capture_once(self, admission: str, how: str, present: str) -> None:
        m = self.model[admission]
        expected = self._base(how)
        presented = {
            "own": m.session,
            "other": next((x for x in self.opened if x in self.live and x != m.session), None),
            "none": None,
        }[present]
        line = f"- fact {admission[-8:]}"
        predicted = self._predict(admission, m, expected, presented)
        try:
            receipt = self.assistant.commit_capture(
                "ws",
                m.credential,
                idempotency_key=f"memory:{admission}",
                key_session_id=presented,
                changes=[MemoryChange("add", line)],
                expected_version=expected,
            )
        except FenceRefused:
            got: tuple[object, ...] = ("fenced",)
        except VersionConflict as exc:
            got = ("conflict", exc.current_version)
        except KeySessionUnavailable:
            got = ("no key session",)
        except CaptureRefused:
            got = ("refused",)
        else:
            got = ("replay" if receipt.replayed else "ok", receipt.version.version)
        assert got == predicted, f"capture {how}/{present}: service said {got}, model predicted {predicted}"
        event(f"capture: {got[0]}")
        MACHINE_FIGURES[f"capture {got[0]}"] += 1
        if got[0] == "ok":
            version = self.version + 1
            base_text = self.texts.get(expected, "")
            self.texts[version] = apply_memory_changes(base_text, [MemoryChange("add", line)])
            self.ops[version] = Operation.CAPTURE
            self.fence[admission] = version
            m.committed, m.committed_expected = version, expected

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), latest=st.sampled_from([True, True, False]))
    def recall(self, data: st.DataObject, latest: bool) -> None:
        admission = self._pick(data, latest)
        m = self.model[admission]
        result = self.assistant.recall("ws", m.credential)
        event(f"recall: {result.status.value}")
        MACHINE_FIGURES[f"recall {result.status.value}"] += 1
        head = self.version
        text = self.texts.get(head, "")
        if self.slot.get(m.conversation) != admission:
            expected = (RecallStatus.SUPERSEDED, None, None)
        elif not self.ai:
            expected = (RecallStatus.NO_ACCESS, None, None)
        elif self.clock.now >= m.expires_at:
            expected = (RecallStatus.UNAVAILABLE, None, None)
        elif self.mode is Mode.OFF:
            expected = (RecallStatus.OFF, None, None)
        elif head == 0:
            expected = (RecallStatus.EMPTY, 0, None)
        elif m.session not in self.live:
            expected = (RecallStatus.UNAVAILABLE, head, None)
        elif not text.strip():
            expected = (RecallStatus.EMPTY, head, None)
        else:
            expected = (RecallStatus.PROVIDED, head, text)
        assert (result.status, result.revision, result.text) == expected

    # --- what must hold after every step ----------------------------------------------------------

    @invariant()
    def agrees_with_the_model(self) -> None:
        MACHINE_FIGURES["steps checked"] += 1
        policy = self.person.get_policy()
        assert (policy.mode, policy.revision, policy.clear_generation) == (self.mode, self.revision, self.generation)
        consent = self.assistant.ai_consent(LOCAL_USER, "ws")
        assert (consent.enabled, consent.revision) == (self.ai, self.consent)
        history = self.person.history(limit=1000)
        assert {r.version: r.operation for r in history} == self.ops
        doc = self.person.load()
        assert (doc.version, doc.text) == (self.version, self.texts.get(self.version, ""))
        with self.service.db.read() as conn:
            fence = dict(conn.execute("SELECT admission_id, version FROM workspace_memory_commit_fence").fetchall())
        assert fence == self.fence


#: What the state machine exercised in this run (across every Hypothesis example, shrinking included).
MACHINE_FIGURES: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def _machine_figures() -> Iterator[None]:
    started = time.perf_counter()
    yield
    if MACHINE_FIGURES["runs"]:
        record_figures(
            "race-policy-machine",
            seconds=round(time.perf_counter() - started, 1),
            **dict(sorted(MACHINE_FIGURES.items())),
        )


PolicyMachine.TestCase.settings = settings(
    max_examples=sized(60, 400),
    stateful_step_count=sized(40, 60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_the_whole_policy_against_the_model = PolicyMachine.TestCase


class PostgresPolicyMachine(PolicyMachine):
    """The same machine with its database on the session's PostgreSQL server, a fresh schema per run."""

    server: PostgresServer | None = None

    def database(self) -> str:
        assert self.server is not None
        return self.server.fresh_url()

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            assert self.server is not None
            self.server.drop(self.target)


def test_the_whole_policy_against_the_model_on_postgresql(postgres_server: PostgresServer) -> None:
    """PostgreSQL at a third of the SQLite run's examples (each run migrates a fresh schema)."""
    PostgresPolicyMachine.server = postgres_server
    run_state_machine_as_test(
        PostgresPolicyMachine,
        settings=settings(
            max_examples=sized(20, 150),
            stateful_step_count=sized(40, 60),
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


# --- (b) concurrent clients, checked for linearizability -----------------------------------------


def _record_batches(service: MemoryService) -> threading.local:
    """Note when each write batch begins (inside the write lock, after BEGIN IMMEDIATE).

    Every batch holds the process's write lock from BEGIN to COMMIT/ROLLBACK, so the order
    of these instants is the order in which the batches took effect: each operation's
    linearization point, as the service itself serialised it.
    """
    seen = threading.local()
    write = service.db.write

    @contextmanager
    def recording_write() -> Iterator[sqlite3.Connection]:
        with write() as conn:
            seen.batches = [*getattr(seen, "batches", []), time.perf_counter_ns()]
            yield conn

    service.db.write = recording_write  # type: ignore[method-assign]
    return seen


def _run_history(
    path: str | Path, clients: int, ops_each: int, seed: int
) -> tuple[list[Op], list[Op], MemoryService, Counter[str]]:
    service = MemoryService(path)
    service.accounts.add_user(LOCAL_USER)
    service.accounts.create_workspace("ws", LOCAL_USER)
    key = sealing.new_key()
    service.assistant.set_ai(LOCAL_USER, "ws", True)
    sessions = [service.assistant.open_key_session(LOCAL_USER, "ws", key).id for _ in range(clients)]
    history: list[Op] = []
    at_commit: list[Op] = []  # the same operations, each narrowed to the instant its batch took effect
    batches = _record_batches(service)
    lock = threading.Lock()
    start = threading.Barrier(clients)
    errors: list[BaseException] = []
    in_flight: dict[int, str | None] = {}
    tally: Counter[str] = Counter()

    def client(n: int) -> None:
        rng = random.Random(seed * 100 + n)
        person = LocalBackend(service, "ws", key)
        a = service.assistant
        known_version = known_revision = 0
        admission = None  # (id, conversation, mode, revision, generation, credential)
        sends = 0
        start.wait()
        for _ in range(ops_each):
            roll = rng.random()
            batches.batches = []
            t0 = time.perf_counter_ns()
            try:
                if roll < 0.25:
                    kind, args = "save", (known_version,)
                    try:
                        result: tuple[object, ...] = (
                            "ok",
                            person.save(f"client {n} says {t0}\n", known_version).version,
                        )
                    except VersionConflict as exc:
                        result = ("conflict", exc.current_version)
                elif roll < 0.35:
                    kind, args = "clear", (known_version,)
                    try:
                        result = ("ok", person.clear(known_version).version)
                    except VersionConflict as exc:
                        result = ("conflict", exc.current_version)
                elif roll < 0.55:
                    mode = Mode.AUTO if rng.random() < 0.7 else Mode.READ_ONLY
                    kind, args = "mode", (mode, known_revision)
                    try:
                        p = person.set_policy(mode, known_revision)
                        result = ("ok", p.mode, p.revision)
                    except PolicyConflict as exc:
                        result = ("conflict", exc.current_revision)
                elif roll < 0.61:
                    # The person behind any client revokes that client's key session, maybe mid-capture.
                    busy = [k for k in in_flight.values() if k]  # prefer a session a capture is using now
                    victim = rng.choice(busy) if busy and rng.random() < 0.8 else sessions[rng.randrange(clients)]
                    kind, args = "revoke", (victim,)
                    try:
                        a.revoke_key_session(LOCAL_USER, victim)
                        result = ("ok",)
                    except NotFound:
                        result = ("not found",)
                elif admission is None:
                    if a.key_sessions.describe(sessions[n]) is None:  # revoked: open another (RAM only)
                        sessions[n] = a.open_key_session(LOCAL_USER, "ws", key).id
                    sends += 1
                    conversation = f"c{n}" if rng.random() < 0.7 else "shared"
                    kind, args = "admit", (conversation, sessions[n])
                    try:
                        adm = a.admit(
                            LOCAL_USER,
                            "ws",
                            conversation,
                            idempotency_key=f"{n}-{sends}",
                            key_session_id=sessions[n],
                            memory_state=None,
                        )
                    except KeySessionUnavailable:  # revoked by another client since: nothing admitted
                        result = ("no key session",)
                    else:
                        result = ("ok", adm.id, adm.mode, adm.policy_revision, adm.clear_generation)
                        admission = (
                            adm.id, conversation, adm.mode, adm.policy_revision, adm.clear_generation, sessions[n]
                        )  # fmt: skip
                        credential = adm.credential
                else:
                    kind, args = "capture", (*admission, known_version)
                    in_flight[n] = admission[5]
                    try:
                        receipt = a.commit_capture(
                            "ws",
                            credential,
                            idempotency_key=f"memory:{admission[0]}",
                            key_session_id=admission[5],  # the turn's own session, as the runtime presents it
                            changes=[MemoryChange("add", f"- from {n} at {t0}")],
                            expected_version=known_version,
                        )
                        result = ("ok", receipt.version.version)
                    except VersionConflict as exc:
                        result = ("conflict", exc.current_version)
                    except FenceRefused as exc:
                        result = ("fenced",)
                        if "the key session was not revoked" in exc.details.get("reasons", []):
                            with lock:
                                tally["fenced by a revocation"] += 1
                    except KeySessionUnavailable:
                        result = ("no key session",)
                    finally:
                        in_flight[n] = None
                    admission = None
            except MemframeError as exc:  # anything else is a failure of the run, reported below
                errors.append(exc)
                return
            t1 = time.perf_counter_ns()
            if result[0] in ("ok", "conflict") and kind in ("save", "clear", "capture"):
                known_version = int(result[1])  # type: ignore[call-overload]
            if kind == "mode":
                known_revision = int(result[2] if result[0] == "ok" else result[1])  # type: ignore[call-overload]
            op = Op(n, kind, args, result, t0, t1)
            assert len(batches.batches) <= 1, f"{kind} took {len(batches.batches)} write batches"
            point = batches.batches[0] if batches.batches else None
            with lock:
                history.append(op)
                # An operation that never reached a batch (its key session was already gone) keeps its interval.
                at_commit.append(op if point is None else Op(n, kind, args, result, point, point))

    # Widen the window the fence exists for: between the key-session check and the batch,
    # sometimes let other clients run (after the key session is resolved, immediately before the batch).
    pause = random.Random(seed)
    store = service.assistant.key_sessions
    resolve = store.key_and_opener

    def resolved_then_maybe_pause(session_id: str | None, workspace_id: str) -> Any:
        found = resolve(session_id, workspace_id)
        time.sleep(pause.choice([0, 0, 0.001]))
        return found

    store.key_and_opener = resolved_then_maybe_pause
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)  # switch threads often, so calls really overlap
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(switch)
    assert not errors, errors
    return history, at_commit, service, tally


SCHEDULES = sized(14, 350)


def test_concurrent_histories_are_linearizable(store_at: Callable[[str], str]) -> None:
    checked = ops_total = captures = fenced = revocation_window = 0
    started = time.perf_counter()
    on_postgres = store_at.engine == "postgresql"  # type: ignore[attr-defined]
    # PostgreSQL runs half the schedules: each batch there is a round trip, not a function call.
    for schedule in range(SCHEDULES // 2 if on_postgres else SCHEDULES):
        clients = 2 + schedule % 7
        ops_each = 200 // clients
        history, at_commit, service, tally = _run_history(store_at(f"h{schedule}.db"), clients, ops_each, schedule)
        revocation_window += tally["fenced by a revocation"]
        try:
            order = linearize(history, State(), memframe_step)
            assert order is not None, f"schedule {schedule} ({clients} clients) is not linearizable"
            # Stronger: the order in which the service really committed explains every answer, so each
            # capture's fence judged exactly the state at its own commit point.
            serial = linearize(at_commit, State(), memframe_step)
            assert serial is not None, f"schedule {schedule}: the service's own commit order contradicts the model"
            final = replay(at_commit, serial, State())
            with raw(service.db.url) as conn:
                assert not store_problems(conn)
                head = conn.execute(
                    "SELECT current_version FROM files WHERE workspace_id = 'ws' AND path = ?", (MEMORY_PATH,)
                ).fetchone()
                policy = conn.execute(
                    "SELECT mode, policy_revision, clear_generation FROM workspace_memory_policy"
                ).fetchone() or ("read_only", 0, 0)
                committed = {r[0] for r in conn.execute("SELECT admission_id FROM workspace_memory_commit_fence")}
            assert (head[0] if head else 0) == final.version
            assert (Mode(policy[0]), policy[1], policy[2]) == (final.mode, final.revision, final.generation)
            assert committed == set(final.consumed)
        finally:
            service.close()
        checked += 1
        ops_total += len(history)
        captures += sum(1 for op in history if op.kind == "capture" and op.result[0] == "ok")
        fenced += sum(1 for op in history if op.kind == "capture" and op.result[0] in ("fenced", "no key session"))
    record_figures(
        "race-linearizability",
        histories=checked,
        operations=ops_total,
        committed_captures=captures,
        fenced_captures=fenced,
        fenced_by_a_revocation_in_the_window=revocation_window,
        violations=0,
        seconds=round(time.perf_counter() - started, 1),
    )
    assert captures > 0 and fenced > 0, "the schedules never exercised both sides of the fence"


# --- the checker itself ---------------------------------------------------------------------------


def _op(client: int, kind: str, args: tuple[object, ...], result: tuple[object, ...], t0: int, t1: int) -> Op:
    return Op(client, kind, args, result, t0, t1)


def test_the_checker_finds_a_capture_that_landed_after_its_authority_was_retired() -> None:
    admitted = _op(1, "admit", ("c", "ks"), ("ok", "adm", Mode.AUTO, 1, 0), 0, 1)
    to_auto = _op(0, "mode", (Mode.AUTO, 0), ("ok", Mode.AUTO, 1), -2, -1)
    to_read_only = _op(0, "mode", (Mode.READ_ONLY, 1), ("ok", Mode.READ_ONLY, 2), 2, 3)
    landed = _op(1, "capture", ("adm", "c", Mode.AUTO, 1, 0, "ks", 0), ("ok", 1), 4, 5)
    assert linearize([to_auto, admitted, to_read_only, landed], State(), memframe_step) is None
    # Overlapping the mode change, the capture may have gone first: then it is fine.
    overlapping = _op(1, "capture", ("adm", "c", Mode.AUTO, 1, 0, "ks", 0), ("ok", 1), 2, 5)
    assert linearize([to_auto, admitted, to_read_only, overlapping], State(), memframe_step) is not None


def test_the_checker_finds_a_lost_or_doubled_version() -> None:
    a = _op(0, "save", (0,), ("ok", 1), 0, 10)
    b = _op(1, "save", (0,), ("ok", 1), 1, 9)  # both acknowledged version 1 against base 0
    assert linearize([a, b], State(), memframe_step) is None
    c = _op(1, "save", (0,), ("conflict", 1), 1, 9)
    assert linearize([a, c], State(), memframe_step) is not None
    stale_read = _op(2, "clear", (0,), ("conflict", 0), 11, 12)  # after a returned, the server cannot be at 0
    assert linearize([a, c, stale_read], State(), memframe_step) is None


def test_the_checker_holds_revocations_to_their_durable_row() -> None:
    to_auto = _op(0, "mode", (Mode.AUTO, 0), ("ok", Mode.AUTO, 1), 0, 1)
    admitted = _op(1, "admit", ("c", "ks"), ("ok", "adm", Mode.AUTO, 1, 0), 2, 3)
    revoked = _op(0, "revoke", ("ks",), ("ok",), 4, 5)
    capture = ("adm", "c", Mode.AUTO, 1, 0, "ks", 0)
    assert (
        linearize([to_auto, admitted, revoked, _op(1, "capture", capture, ("ok", 1), 6, 7)], State(), memframe_step)
        is None
    )
    for answer in [("fenced",), ("no key session",)]:
        after = _op(1, "capture", capture, answer, 6, 7)
        assert linearize([to_auto, admitted, revoked, after], State(), memframe_step) is not None
    # Before the revocation began, the session cannot have been missing.
    early = _op(1, "capture", capture, ("no key session",), 3, 4)
    assert (
        linearize([to_auto, admitted, _op(0, "revoke", ("ks",), ("ok",), 5, 6), early], State(), memframe_step) is None
    )


# --- several processes on one PostgreSQL ---------------------------------------------------------

CROSS_PROCESS_SECONDS = sized(4, 60)


def test_captures_and_mode_flips_in_separate_processes_stay_linearizable_on_postgresql(
    postgres_server: PostgresServer,
) -> None:
    """Three processes on one PostgreSQL database: one captures, one flips the mode (each flip retires
    the turns admitted before it), one reads the policy and the memory from one snapshot at a time.

    A capture admitted under policy revision R committed only if its fence saw revision R at its
    batch's linearisation point; so any reader that has seen a revision above R must also see that
    capture's version. A fence judging an older snapshot than its commit (what READ COMMITTED does
    without the write lock) lets a reader see the flip without the capture that then lands.
    """
    import multiprocessing

    from tests.reliability import pg_workers

    url = postgres_server.fresh_url()
    key = sealing.new_key()
    try:
        setup = MemoryService(url)
        setup.accounts.add_user(LOCAL_USER)
        setup.accounts.create_workspace("ws", LOCAL_USER)
        person = LocalBackend(setup, "ws", key)
        person.save("# Memory\n", 0)
        person.set_ai(True)
        person.set_policy(Mode.AUTO, 0)
        ctx = multiprocessing.get_context("spawn")
        pipes, procs = [], []
        for target, args in (
            (pg_workers.capturer, (url, key, CROSS_PROCESS_SECONDS, "first")),
            (pg_workers.capturer, (url, key, CROSS_PROCESS_SECONDS, "second")),
            (pg_workers.flipper, (url, key, CROSS_PROCESS_SECONDS, 7)),
            (pg_workers.reader, (url, CROSS_PROCESS_SECONDS)),
        ):
            receive, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=target, args=(*args, send), daemon=True)
            proc.start()
            send.close()
            pipes.append(receive)
            procs.append(proc)
        results = []
        for receive in pipes:
            assert receive.poll(CROSS_PROCESS_SECONDS + 120), "a worker process never reported"
            results.append(receive.recv())
        for proc in procs:
            proc.join(30)
            assert proc.exitcode == 0
        (c1, r1, why1), (c2, r2, why2), flips, seen = results
        with raw(url) as conn:
            assert not store_problems(conn)
            captures = conn.execute(
                "SELECT f.version, a.policy_revision FROM workspace_memory_commit_fence AS f"
                " JOIN workspace_memory_admissions AS a ON a.id = f.admission_id"
            ).fetchall()
        setup.close()
        assert len(captures) == c1 + c2 and c1 + c2 > 0 and r1 + r2 > 0 and flips > 0, (c1, c2, r1, r2, flips)
        violations = [
            (version, admitted_at, revision, saw)
            for version, admitted_at in captures
            for revision, saw in seen
            if revision > admitted_at and saw < version
        ]
        assert not violations, f"a reader saw a mode flip without the capture ordered before it: {violations[:5]}"
        record_figures(
            "race-cross-process-postgresql",
            committed=c1 + c2,
            fenced=r1 + r2,
            flips=flips,
            snapshots=len(seen),
            refusals=dict(Counter(why1) + Counter(why2)),
            violations=0,
        )
    finally:
        postgres_server.drop(url)
