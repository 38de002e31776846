"""Bounds a DataTable's render caches to a few screens of lines, so walking a long list does not stall.

DataTable keys each cached line by the cursor's position, so every cursor move renders the visible lines
afresh while the stale ones stay cached (up to 1,000 lines and 10,000 cells), and the garbage collector's
full passes over those objects stall a walk down the Changes list by a margin a person feels (bench: "frame
longest UI stall"); bounded by what is on screen, the table draws exactly the same and forgets only renders
no cursor position shows any more.
"""

from __future__ import annotations

from textual.widgets import DataTable

#: The fewest rendered lines and cells a table keeps cached (more on a taller screen).
LINES_CACHED = 64
CELLS_CACHED = 1024


def bound_render_caches(table: DataTable[str], height: int) -> None:
    """Size `table`'s render caches for `height` rows on screen (call it on every resize)."""
    lines = max(LINES_CACHED, 4 * height)
    sizes = {
        "_row_render_cache": lines,
        "_line_cache": lines,
        "_row_renderable_cache": lines,
        "_cell_render_cache": max(CELLS_CACHED, lines * len(table.columns)),
    }
    for name, size in sizes.items():
        # DataTable's own caches (not public API): a Textual that renames one keeps its default size.
        cache = getattr(table, name, None)
        if cache is not None and hasattr(cache, "maxsize"):
            cache.maxsize = size
