"""Sentences of the contract that several places say to a person, each worded once."""

from __future__ import annotations

#: What Clear does and does not do: the contract's honest boundary, said by the CLI, the frame's
#: confirmation and its status line alike.
CLEAR_BOUNDARY = (
    "Older automatic work is fenced (captures admitted before the Clear are refused); "
    "conversation history is not deleted, so an open conversation can still see what was said earlier."
)
