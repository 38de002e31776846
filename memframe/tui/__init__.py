"""The Memory frame: a Textual app to edit, review, undo and clear a workspace's memory, and talk to its Assistant.

Layout, so the folder reads as the architecture:

    app.py          the thin App, the app factory (CLI, snapshot tests, screenshots) and run_frame
    state.py        DocumentState: draft, base version, dirty flag, in-flight write (no Textual)
    calls.py        backend calls as run on worker threads, each returning an outcome (no Textual)
    messages.py     the messages that carry those outcomes back to the UI
    text.py         diffs, sizes, times and locations as people read them (no Textual)
    memory.py       the main screen: editor, status, and the Save / Clear / Undo / Reload / Quit flows
    editor.py       the Markdown editor with its rendered preview
    status.py       the status bar, the size meter and the oversized warning
    mode.py         the mode switcher (compare-and-set on the policy revision)
    changes.py      the Changes screen: revisions page by page, diffs, Undo; opens at a given revision
    apply.py        the main screen's flows for the Assistant's changes: apply a proposal, catch up
    conversation.py this session's conversation and how receipts and tool outcomes are worded (no Textual)
    assistant_calls.py  sends, AI switch and proposal previews as run on worker threads (no Textual)
    assistant.py    the Assistant pane: send, answers with their receipts, Changes at a revision, AI on/off
    proposals.py    the Proposals screen: pending proposals with their diffs; Apply (a Save) or Dismiss
    dialogs/        Save/Discard/Cancel, Clear confirmation, the conflict views
    screenshots.py  `python -m memframe.tui.screenshots DIR`: SVGs of the main states

The frame talks to nothing but a `memframe.backend.base.Backend`.
"""
