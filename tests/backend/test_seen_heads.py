"""The seen-heads record (`memframe.backend.heads`): a JSON Lines file that only moves forward.

What these pin: two clients on one machine never lower each other's record, a line torn by a
crash is skipped (the version seen before it stands), the earlier one-document format is still
read and rewritten in this one, the file is rewritten whole only now and then and stays small,
and it is the person's alone (0600).
"""

from __future__ import annotations

import json
import stat
import threading
from pathlib import Path

import pytest

from memframe.backend import heads
from memframe.backend.heads import Seen, SeenHeads
from memframe.core.errors import RolledBack

H1, H2 = "1" * 64, "2" * 64


def _file(tmp_path: Path) -> Path:
    return tmp_path / "keys" / "scope" / "w.seen.json"


def test_a_fresh_client_reads_what_another_noted(tmp_path: Path) -> None:
    a = SeenHeads(_file(tmp_path))
    a.note("MEMORY.md", 1, H1, 1)
    a.note("MEMORY.md", 2, H2, None)  # a since it does not know keeps the one seen
    assert SeenHeads(_file(tmp_path)).get("MEMORY.md") == Seen(2, H2, 1)
    with pytest.raises(RolledBack):
        SeenHeads(_file(tmp_path)).check("MEMORY.md", 1, "")


def test_two_clients_never_lower_each_other(tmp_path: Path) -> None:
    a, b = SeenHeads(_file(tmp_path)), SeenHeads(_file(tmp_path))  # both read an empty record
    a.note("MEMORY.md", 5, H1, 1)
    b.note("MEMORY.md", 3, H2, 1)  # b had not seen 5: the record keeps it
    b.note("notes/x.md", 2, H2, 2)
    a.note("MEMORY.md", 6, H1, 1)
    fresh = SeenHeads(_file(tmp_path))
    assert fresh.get("MEMORY.md") == Seen(6, H1, 1)
    assert fresh.get("notes/x.md") == Seen(2, H2, 2)
    assert b.get("MEMORY.md") == Seen(5, H1, 1)  # b learnt a's newer head when it wrote
    assert a.get("notes/x.md") == Seen(2, H2, 2)


def test_clients_noting_at_once_keep_every_newest_head(tmp_path: Path) -> None:
    clients = [SeenHeads(_file(tmp_path)) for _ in range(4)]

    def run(n: int) -> None:
        for v in range(1, 151):
            clients[n].note(f"doc{n}.md", v, H1, 1)
            clients[n].note("MEMORY.md", v * 4 + n, H2, 1)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fresh = SeenHeads(_file(tmp_path))
    assert {p: s.version for p, s in fresh._docs.items()} == {
        "MEMORY.md": 603,
        **{f"doc{n}.md": 150 for n in range(4)},
    }


def test_a_torn_last_line_is_skipped_and_the_next_note_starts_its_own(tmp_path: Path) -> None:
    a = SeenHeads(_file(tmp_path))
    a.note("MEMORY.md", 1, H1, 1)
    a.note("MEMORY.md", 2, H1, 1)
    with open(_file(tmp_path), "ab") as fh:  # a crash in the middle of appending version 3
        fh.write(b'{"path": "MEMORY.md", "version": 3, "ha')
    b = SeenHeads(_file(tmp_path))
    assert b.get("MEMORY.md") == Seen(2, H1, 1)
    b.note("MEMORY.md", 4, H2, 1)
    assert SeenHeads(_file(tmp_path)).get("MEMORY.md") == Seen(4, H2, 1)
    assert a.get("MEMORY.md") == Seen(2, H1, 1)
    a.note("notes/y.md", 1, H1, 1)  # a reads b's line first, past the torn one
    assert a.get("MEMORY.md") == Seen(4, H2, 1)


def test_at_the_same_version_the_head_noted_last_wins(tmp_path: Path) -> None:
    a, b = SeenHeads(_file(tmp_path)), SeenHeads(_file(tmp_path))
    a.note("MEMORY.md", 2, H1, 1)
    b.note("MEMORY.md", 2, H2, 1)
    assert b.get("MEMORY.md") == Seen(2, H2, 1)
    assert SeenHeads(_file(tmp_path)).get("MEMORY.md") == Seen(2, H2, 1)


def test_the_earlier_format_is_read_and_rewritten_in_this_one(tmp_path: Path) -> None:
    path = _file(tmp_path)
    path.parent.mkdir(parents=True)
    doc = {
        "format": "memframe-seen/1",
        "documents": {"MEMORY.md": {"version": 7, "hash": H1, "since": 2}, "bad.md": {"version": "x"}},
    }
    path.write_text(json.dumps(doc, indent=1) + "\n")
    old = SeenHeads(path)
    assert old.get("MEMORY.md") == Seen(7, H1, 2) and old.get("bad.md") is None
    old.note("notes/z.md", 1, H2, 1)
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert lines[0] == {"format": "memframe-seen/2"}
    assert SeenHeads(path).get("MEMORY.md") == Seen(7, H1, 2)
    assert SeenHeads(path).get("notes/z.md") == Seen(1, H2, 1)


def test_a_damaged_record_reads_as_nothing_seen_and_is_rewritten(tmp_path: Path) -> None:
    path = _file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x00\x00not json\n")
    damaged = SeenHeads(path)
    assert damaged.get("MEMORY.md") is None
    damaged.note("MEMORY.md", 3, H1, 1)
    assert path.read_bytes().startswith(b'{"format": "memframe-seen/2"}\n')
    assert SeenHeads(path).get("MEMORY.md") == Seen(3, H1, 1)


def test_the_record_is_rewritten_whole_now_and_then_and_stays_small(tmp_path: Path) -> None:
    path = _file(tmp_path)
    a, b = SeenHeads(path), SeenHeads(path)
    for v in range(1, 10 * heads._REWRITE_AFTER):
        (a if v % 3 else b).note("MEMORY.md", v, H1, 1)
        if v % 7 == 0:
            a.note("notes/a.md", v, H2, 1)
        assert len(path.read_bytes().splitlines()) <= 1 + 2 + heads._REWRITE_AFTER
    fresh = SeenHeads(path)
    last = 10 * heads._REWRITE_AFTER - 1
    assert fresh.get("MEMORY.md") == Seen(last, H1, 1)
    assert fresh.get("notes/a.md") == Seen(last - last % 7, H2, 1)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not list(path.parent.glob("*.tmp*"))


def test_a_record_in_memory_only_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMFRAME_HOME", str(tmp_path))
    memory = SeenHeads(None)
    memory.note("MEMORY.md", 1, H1, 1)
    assert memory.get("MEMORY.md") == Seen(1, H1, 1)
    assert not list(tmp_path.rglob("*"))


def test_latest_reads_what_another_client_noted_since(tmp_path: Path) -> None:
    """A long-running client (the frame, `memframe mcp`) reports what the machine has seen."""
    running, other = SeenHeads(_file(tmp_path)), SeenHeads(_file(tmp_path))
    other.note("MEMORY.md", 2, H2, 1)
    assert running.get("MEMORY.md") is None
    assert running.latest("MEMORY.md") == Seen(2, H2, 1)
    assert SeenHeads(None).latest("MEMORY.md") is None  # a record in memory only reads nothing


def test_forgetting_versions_keeps_each_chain_start_and_can_be_put_back(tmp_path: Path) -> None:
    a = SeenHeads(_file(tmp_path))
    a.note("MEMORY.md", 5, H1, 3)
    before = a.forget_versions()
    assert before == {"MEMORY.md": Seen(5, H1, 3)}
    fresh = SeenHeads(_file(tmp_path))
    assert fresh.get("MEMORY.md") == Seen(0, "", 3)
    fresh.check("MEMORY.md", 1, "")  # an older head is no longer refused
    a.remember(before)  # an acceptance that failed half way
    with pytest.raises(RolledBack):
        SeenHeads(_file(tmp_path)).check("MEMORY.md", 4, "")
