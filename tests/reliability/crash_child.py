"""The crash-trial child: saves, clears, undos, mode changes and fenced captures in a loop.

It runs in a process forked from a pre-imported fork server (so each trial
starts in milliseconds) and writes to the SQLite file until the parent kills it
with SIGKILL. After each call *returns*, it sends an acknowledgement down a
pipe: what a client would have been told. The parent then checks that every
acknowledged write is in the database exactly as acknowledged.

Acknowledgements (tuples):

    ("ready", version, policy_revision)
    ("write", operation, version, content_hash, restored_from)   save / clear / undo
    ("capture", admission_id, version, content_hash)             a fence commit
    ("refused", admission_id)                                    a capture the fence refused
    ("mode", mode, policy_revision)
    ("admitted", admission_id)
"""

from __future__ import annotations

import random
from multiprocessing.connection import Connection

from memframe.backend.local import LocalBackend
from memframe.core.edits import MemoryChange
from memframe.core.errors import EditRefused, FenceRefused
from memframe.core.types import Mode
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER

WORKSPACE = "ws"
_FILLER = "Lorem ipsum dolor sit amet, 漢字かな交じり, émoji 🧠. "


def run_worker(db_path: str, key: bytes, seed: int, ack: Connection) -> None:
    """Loop writes forever; the parent's SIGKILL is the only way out."""
    rng = random.Random(seed)
    service = MemoryService(db_path)
    person = LocalBackend(service, WORKSPACE, key)
    assistant = service.assistant
    session = assistant.open_key_session(LOCAL_USER, WORKSPACE, key).id
    doc = person.load()
    version, text_size = doc.version, len(doc.text.encode())
    policy = person.get_policy()
    mode, revision = policy.mode, policy.revision
    ack.send(("ready", version, revision))
    turn = 0

    def admit() -> str:
        nonlocal turn
        turn += 1
        a = assistant.admit(
            LOCAL_USER,
            WORKSPACE,
            f"conv-{seed}-{turn % 3}",
            idempotency_key=f"send-{seed}-{turn}",
            key_session_id=session,
            memory_state=None,
        )
        ack.send(("admitted", a.id))
        return a.credential

    def capture(credential: str, line: str) -> tuple[str, int, str]:
        admission_id = credential.removeprefix("cred_").partition(".")[0]
        receipt = assistant.commit_capture(
            WORKSPACE,
            credential,
            idempotency_key=f"memory:{admission_id}",
            key_session_id=session,
            changes=[MemoryChange("add", line)],
            expected_version=version,
        )
        return admission_id, receipt.version.version, receipt.version.content_hash

    def set_mode(new: Mode) -> None:
        nonlocal mode, revision
        p = person.set_policy(new, revision)
        mode, revision = p.mode, p.revision
        ack.send(("mode", mode.value, revision))

    step = 0
    while True:
        step += 1
        roll = rng.random()
        if text_size > 5000:  # keep captures under the recall bound
            roll = 0.0
        if roll < 0.30:
            text = f"# Memory {seed}.{step}\n" + _FILLER * rng.randint(0, 40)
            info = person.save(text, version)
            version, text_size = info.version, len(text.encode())
            ack.send(("write", "save", version, info.content_hash, None))
        elif roll < 0.40:
            info = person.clear(version)
            version, text_size = info.version, 0
            ack.send(("write", "clear", version, info.content_hash, None))
        elif roll < 0.50 and version >= 1:
            restored = rng.randint(1, version)
            info = person.undo(restored, version)
            version = info.version
            text_size = info.size
            ack.send(("write", "undo", version, info.content_hash, restored))
        elif roll < 0.58:
            set_mode(rng.choice([Mode.AUTO, Mode.AUTO, Mode.READ_ONLY, Mode.OFF]))
        elif roll < 0.90:
            if mode is not Mode.AUTO:
                set_mode(Mode.AUTO)
                continue
            credential = admit()
            try:
                admission_id, version, digest = capture(credential, f"- fact {seed}.{step}")
            except EditRefused:
                continue
            text_size += len(f"- fact {seed}.{step}\n")
            ack.send(("capture", admission_id, version, digest))
        else:
            # A capture that must be fenced: the authority changed between admission and commit.
            if mode is not Mode.AUTO:
                set_mode(Mode.AUTO)
                continue
            credential = admit()
            if rng.random() < 0.5:
                set_mode(Mode.READ_ONLY)
            else:
                info = person.clear(version)
                version, text_size = info.version, 0
                ack.send(("write", "clear", version, info.content_hash, None))
            try:
                capture(credential, f"- fenced {seed}.{step}")
            except FenceRefused:
                ack.send(("refused", credential.removeprefix("cred_").partition(".")[0]))
            else:
                raise AssertionError("a capture whose authority changed was committed")
