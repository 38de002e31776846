"""Sentences of the contract that several places say to a person, each worded once."""

from __future__ import annotations

#: What Clear does and does not do: the contract's honest boundary, said by the CLI, the frame's
#: confirmation and its status line alike.
CLEAR_BOUNDARY = (
    "Older automatic work is fenced (captures admitted before the Clear are refused); "
    "conversation history is not deleted, so an open conversation can still see what was said earlier."
)


def many(count: int, what: str) -> str:
    """`count` of `what`, singular for one: a receipt says "1 version", never "1 version(s)"."""
    return f"{count:,} {what}{'' if count == 1 else 's'}"


def versions(first: int, last: int) -> str:
    """A run of versions as a person says it: "version 4" alone, "versions 1–3" for more."""
    return f"version {first}" if first == last else f"versions {first}–{last}"
