"""Recall in-process against its fair floor: the reads the contract names and one decrypt.

Recall over HTTP is measured with the team server (`bench.team`), beside a no-op route on the same server.
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
import time
from pathlib import Path

from bench.data import admit_many, create_workspaces, memory_text, new_service, open_key_sessions
from bench.harness import Figure, Stats, latency_figure, log, paired
from bench.settings import Settings
from memframe import sealing
from memframe.core.types import MEMORY_PATH, Mode, RecallStatus

#: The fair floor: the reads the contract names for a recall (the admission, the conversation's
#: credential slot, membership, consent, policy and the memory's head), in the same joins as the
#: service's one statement, written out here so the floor is the bench's, not the code it measures.
CONTRACT_READS = """
SELECT a.conversation_id, a.workspace_id, a.key_session_id, a.client_memory_state, a.credential_nonce,
       s.admission_id, s.credential_nonce, s.expires_at, m.user_id IS NOT NULL, COALESCE(c.enabled, 0), p.mode,
       f.current_version, COALESCE(f.deleted, 0), COALESCE(v.size, 0), v.ciphertext
FROM workspace_memory_admissions AS a
LEFT JOIN agent_delivery_credentials AS s ON s.conversation_id = a.conversation_id
LEFT JOIN memberships AS m ON m.workspace_id = a.workspace_id AND m.user_id = a.user_id
LEFT JOIN workspace_ai_consent AS c ON c.workspace_id = a.workspace_id
LEFT JOIN workspace_memory_policy AS p ON p.workspace_id = a.workspace_id
LEFT JOIN files AS f ON f.workspace_id = a.workspace_id AND f.path = ?
LEFT JOIN file_versions AS v ON v.workspace_id = f.workspace_id AND v.path = f.path AND v.version = f.current_version
WHERE a.id = ?
"""
FLOOR_NAME = "contract reads (admission, credential, membership, consent, policy, head) + 1 decrypt"


def recall_in_process(
    tmp: Path, s: Settings, count: int, aim_limit: float, *, git: Stats | None = None
) -> list[Figure]:
    """Recall among `count` workspaces against the fair floor; given `git` (durable commits measured
    in this run), a person's durable Save on one of them too, beside it (the scale figures: does
    either grow with the number of workspaces?)."""
    # A directory of its own: the scale stage measures 1,000 workspaces again in the same run.
    service = new_service(str(Path(tempfile.mkdtemp(prefix=f"recall-{count}-", dir=tmp)) / "memframe.db"))
    text = memory_text(8 * 1024 - 64)
    started = time.perf_counter()
    spaces = create_workspaces(service, count, text=text, mode=Mode.AUTO, ai=True)
    open_key_sessions(service, spaces)
    admit_many(service, spaces, 1)
    log(f"  {len(spaces):,} workspaces with 8 KiB memory set up in {time.perf_counter() - started:.2f} s")
    rng = random.Random(1)
    samples = s.recall_samples
    order = [rng.randrange(len(spaces)) for _ in range(2 * samples + 20)]
    floor_conn = sqlite3.connect(service.db.path, isolation_level=None)

    def subject(i: int) -> None:
        ws = spaces[order[i]]
        result = service.assistant.recall(ws.id, ws.admissions[0].credential)
        assert result.status is RecallStatus.PROVIDED, result.status

    def floor(i: int) -> None:
        ws = spaces[order[i]]
        row = floor_conn.execute(CONTRACT_READS, (MEMORY_PATH, ws.admissions[0].id)).fetchone()
        sealing.open_sealed(ws.key, row[-1], workspace_id=ws.id, path=MEMORY_PATH, version=row[11])

    def durable_floor(i: int) -> None:
        # What a receipt fsync'd in the call would add to every recall: one durable insert.
        floor(i)
        floor_conn.execute("BEGIN IMMEDIATE")
        floor_conn.execute("INSERT INTO bench_receipts (admission, status, revision) VALUES (?, 'provided', 1)", (i,))
        floor_conn.execute("COMMIT")

    floor_conn.execute("PRAGMA synchronous = FULL")
    floor_conn.execute("CREATE TABLE IF NOT EXISTS bench_receipts (admission INTEGER, status TEXT, revision INTEGER)")
    subject_stats, floor_stats = paired(subject, floor, samples)
    _, durable_stats = paired(subject, durable_floor, max(20, samples // 4))
    figure = latency_figure(
        f"recall in-process, 8 KiB, {len(spaces):,} workspaces",
        subject_stats,
        floor_stats,
        aim=f"p50 ≤ {aim_limit:g}× floor",
        aim_op="ratio<=",
        aim_limit=aim_limit,
        floor_name=FLOOR_NAME,
    )
    figure.note = (
        "the floor runs the very joins recall runs and one decrypt, with no checks and no receipt; recall "
        "adds its checks and queues its receipt (the contract: each recall records status and revision), "
        "which commits with the next batch or within 5 ms. Committing it durably in the call instead would "
        f"cost at least {durable_stats.p50 * 1000:.3f} ms p50 (floor + one fsync'd insert)"
    )
    figures = [figure]
    floor_conn.close()
    if git is not None:
        from bench.data import revisions
        from memframe.backend.local import LocalBackend

        ws = spaces[len(spaces) // 2]
        backend = LocalBackend(service, ws.id, ws.key)
        texts = revisions(s.saves + 1, size=8 * 1024 - 64, seed=11)
        version = ws.version
        times = []
        for edit in texts:
            at = time.perf_counter()
            version = backend.save(edit, version).version
            times.append(time.perf_counter() - at)
        figures.append(
            latency_figure(
                f"human save, local, durable, {len(spaces):,} workspaces",
                Stats.of(times[1:]),
                git,
                aim="≤ 0.1× git",
                aim_op="ratio<=",
                aim_limit=0.1,
                floor_name="git commit -a, core.fsync=committed,index",
            )
        )
    service.close()
    return figures


def recall_delta_heads(tmp: Path, s: Settings) -> list[Figure]:
    """Recall when every head is stored as a delta at the end of the longest chain (version
    KEYFRAME_EVERY: 63 deltas after its keyframe), as saves and captures now write them, with the key
    session warm (it opened this head before). The floor opens a whole copy of the same text."""
    from bench.data import _insert, revisions

    service = new_service(str(tmp / "recall-deltas.db"))
    count = s.recall_workspaces
    texts = list(revisions(sealing.KEYFRAME_EVERY, size=8 * 1024 - 64, seed=4))
    started = time.perf_counter()
    spaces = create_workspaces(service, count, mode=Mode.AUTO, ai=True)
    now = service.db.clock()
    with service.db.write() as conn:
        for ws in spaces:
            before: str | None = None
            for text in texts:
                _insert(conn, ws, text, now, before)
                before = text
    open_key_sessions(service, spaces)
    admit_many(service, spaces, 1)
    whole = {
        ws.id: sealing.seal(ws.key, texts[-1], workspace_id=ws.id, path=MEMORY_PATH, version=ws.version)
        for ws in spaces
    }
    log(f"  {count:,} workspaces, each head a delta {len(texts) - 1} after its keyframe, in "
        f"{time.perf_counter() - started:.2f} s")  # fmt: skip
    rng = random.Random(3)
    order = [rng.randrange(count) for _ in range(2 * s.recall_samples + 20)]
    floor_conn = sqlite3.connect(service.db.path, isolation_level=None)

    def recall(i: int) -> None:
        ws = spaces[order[i]]
        result = service.assistant.recall(ws.id, ws.admissions[0].credential)
        assert result.status is RecallStatus.PROVIDED and result.text == texts[-1], result.status

    def floor(i: int) -> None:
        ws = spaces[order[i]]
        row = floor_conn.execute(CONTRACT_READS, (MEMORY_PATH, ws.admissions[0].id)).fetchone()
        sealing.open_sealed(ws.key, whole[ws.id], workspace_id=ws.id, path=MEMORY_PATH, version=row[11])

    for ws_index in range(count):  # every session has opened its head once (the warm case's premise)
        order_save, order[0] = order[0], ws_index
        recall(0)
        order[0] = order_save
    warm_stats, floor_stats = paired(recall, floor, s.recall_samples)
    floor_conn.close()
    service.close()
    warm = latency_figure(
        f"recall in-process, head a delta {len(texts) - 1} after its keyframe, {count:,} workspaces (warm)",
        warm_stats,
        floor_stats,
        aim="p50 ≤ 1.5× floor",
        aim_op="ratio<=",
        aim_limit=1.5,
        floor_name=FLOOR_NAME + " of a whole copy",
    )
    warm.note = (
        "the key session remembers the heads it opened (RAM only, with their exact ciphertext): a head it "
        "has opened costs no decrypt, a head saved since costs one (a delta against the one it holds)"
    )
    return [warm]


def recall_figures(tmp: Path, s: Settings) -> list[Figure]:
    return recall_in_process(tmp, s, s.recall_workspaces, 1.5) + recall_delta_heads(tmp, s)


def scale_figures(tmp: Path, s: Settings) -> list[Figure]:
    """`python -m bench --scale`: recall and save among 10 … 100,000 workspaces (aim ≤ 2× at 100,000)."""
    from bench.data import revisions
    from bench.writes import durable_git_commits

    figures: list[Figure] = []
    for count in s.scale_workspaces:
        git = durable_git_commits(tmp, list(revisions(s.git_commits + 1, size=8 * 1024 - 64, seed=12)))
        figures += recall_in_process(tmp, s, count, 2.0 if count >= 100_000 else 1.5, git=git)
    return figures
