"""Recall: in-process against one SELECT + one decrypt, and over loopback HTTP against a no-op route."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from bench.data import admit_many, create_workspaces, memory_text, new_service, open_key_sessions
from bench.harness import Figure, latency_figure, log, paired
from bench.settings import Settings
from memframe import crypto
from memframe.core.types import MEMORY_PATH, Mode, RecallStatus

LATEST = (
    "SELECT v.ciphertext, v.version FROM files AS f JOIN file_versions AS v"
    " ON v.workspace_id = f.workspace_id AND v.path = f.path AND v.version = f.current_version"
    " WHERE f.workspace_id = ? AND f.path = ?"
)


def recall_in_process(tmp: Path, s: Settings) -> list[Figure]:
    service = new_service(str(tmp / "recall.db"))
    text = memory_text(8 * 1024 - 64)
    started = time.perf_counter()
    spaces = create_workspaces(service, s.recall_workspaces, text=text, mode=Mode.AUTO, ai=True)
    open_key_sessions(service, spaces)
    admit_many(service, spaces, 1)
    log(f"  {len(spaces)} workspaces with 8 KiB memory set up in {time.perf_counter() - started:.2f} s")
    rng = random.Random(1)
    order = [rng.randrange(len(spaces)) for _ in range(2 * s.recall_samples + 20)]
    floor_conn = sqlite3.connect(service.db.path, isolation_level=None)

    def subject(i: int) -> None:
        ws = spaces[order[i]]
        result = service.assistant.recall(ws.id, ws.admissions[0].credential)
        assert result.status is RecallStatus.PROVIDED, result.status

    def floor(i: int) -> None:
        ws = spaces[order[i]]
        blob, version = floor_conn.execute(LATEST, (ws.id, MEMORY_PATH)).fetchone()
        crypto.open_sealed(ws.key, blob, workspace_id=ws.id, path=MEMORY_PATH, version=version)

    def durable_floor(i: int) -> None:
        # What a receipt fsync'd in the call would add to every recall: one durable insert.
        floor(i)
        floor_conn.execute("BEGIN IMMEDIATE")
        floor_conn.execute("INSERT INTO bench_receipts (admission, status, revision) VALUES (?, 'provided', 1)", (i,))
        floor_conn.execute("COMMIT")

    floor_conn.execute("PRAGMA synchronous = FULL")
    floor_conn.execute("CREATE TABLE IF NOT EXISTS bench_receipts (admission INTEGER, status TEXT, revision INTEGER)")
    subject_stats, floor_stats = paired(subject, floor, s.recall_samples)
    _, durable_stats = paired(subject, durable_floor, max(20, s.recall_samples // 4))
    figure = latency_figure(
        f"recall in-process, 8 KiB, {len(spaces):,} workspaces",
        subject_stats,
        floor_stats,
        aim="p50 ≤ 2× floor",
        aim_op="ratio<=",
        aim_limit=2.0,
        floor_name="SELECT + decrypt",
    )
    figure.note = (
        "recall's one SELECT reads the admission, the credential slot, membership, consent, policy and the "
        "memory's head; its receipt (the contract: each recall records status and revision) is queued and "
        "commits with the next batch or within 5 ms, never after anything that follows it. Committing it "
        f"durably in the call instead would cost at least {durable_stats.p50 * 1000:.3f} ms p50 "
        "(SELECT + decrypt + one fsync'd insert)"
    )
    floor_conn.close()
    service.close()
    return [figure]


def recall_over_http(tmp: Path, s: Settings) -> list[Figure]:
    """A real uvicorn in its own process (so client and server do not share a GIL)."""
    import httpx

    proc = subprocess.Popen(
        [sys.executable, "-m", "bench._server", str(tmp / "http.db"), str(s.http_workspaces)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline() or "{}")
        if "url" not in ready:
            raise RuntimeError("the benchmark server did not start")
        log(f"  uvicorn on {ready['url']} with {len(ready['credentials'])} workspaces")
        creds: list[tuple[str, str]] = ready["credentials"]
        rng = random.Random(2)
        order = [rng.randrange(len(creds)) for _ in range(2 * s.http_samples + 20)]
        with httpx.Client(base_url=ready["url"], timeout=30.0) as client:

            def subject(i: int) -> None:
                ws, credential = creds[order[i]]
                response = client.get(
                    f"/api/v1/automation/workspaces/{ws}/memory",
                    params={"purpose": "recall"},
                    headers={"Authorization": f"Bearer {credential}"},
                )
                assert response.status_code == 200 and response.json()["status"] == "provided", response.text

            def noop(i: int) -> None:
                response = client.get("/healthz")
                assert response.status_code == 200

            subject_stats, floor_stats = paired(subject, noop, s.http_samples, warmup=20)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return [
        latency_figure(
            "recall over loopback HTTP (uvicorn, keep-alive)",
            subject_stats,
            floor_stats,
            aim="p50 ≤ 1.5× no-op",
            aim_op="ratio<=",
            aim_limit=1.5,
            floor_name="GET /healthz",
        )
    ]


def recall_figures(tmp: Path, s: Settings) -> list[Figure]:
    (local,) = recall_in_process(tmp, s)
    (remote,) = recall_over_http(tmp, s)
    assert remote.floor is not None
    rest = remote.value - remote.floor - local.value
    remote.note = (
        f"the no-op's {remote.floor:.2f} ms plus the in-process recall's {local.value:.2f} ms leaves "
        f"{rest:.2f} ms for the route's dependencies, the credential and the 8 KiB JSON reply"
    )
    return [local, remote]
