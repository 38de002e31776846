"""How much each figure measures: the full run (`make bench`) and the quick smoke run (`--quick`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    """Counts: workspaces and samples per figure, revisions of the long history, subprocess runs."""

    mode: str
    recall_workspaces: int = 1000
    recall_samples: int = 2000
    saves: int = 300
    git_commits: int = 60
    history_revisions: int = 10_000
    list_samples: int = 200
    diff_rounds: int = 15
    patch_runs: int = 5
    blame_runs: int = 5
    paint_runs: int = 15  # the ratio's p50 of 7 moved by ±0.03 from run to run
    rss_runs: int = 1
    walk_rows: int = 120
    scale_workspaces: tuple[int, ...] = (10, 1000, 10_000, 100_000)
    storage_revisions: tuple[int, ...] = (1000, 10_000)
    open_samples: int = 300
    scale_revisions: int = 100_000
    #: The team figures: rounds (every load interleaved in each), seconds of recall (and of the no-op) in all,
    #: and Saves per round at 64 clients: this many per client, at least `team_saves_min`.
    team_rounds: int = 4
    team_seconds: float = 3.0
    team_saves_per_client: int = 8
    team_saves_min: int = 60


FULL = Settings(mode="full")
QUICK = Settings(
    mode="quick",
    recall_workspaces=20,
    recall_samples=40,
    saves=10,
    git_commits=3,
    history_revisions=120,
    list_samples=5,
    diff_rounds=1,
    patch_runs=1,
    blame_runs=1,
    paint_runs=1,
    rss_runs=1,
    walk_rows=5,
    scale_workspaces=(10, 50),
    storage_revisions=(70,),
    open_samples=10,
    scale_revisions=150,
    team_rounds=1,
    team_seconds=0.3,
    team_saves_per_client=2,
    team_saves_min=4,
)
