"""The Memory frame: a Textual app to edit, review, undo and clear a workspace's memory, and talk to its Assistant.

Layout, so the folder reads as the architecture:

    app.py          the thin App: the app factory (CLI, snapshot tests, screenshots), run_frame, and the
                    routes from the side screens' messages to the main screen's flows
    flows.py        every flow that writes or replaces the text (load, Save, Reload, Clear, Undo, Mode, Quit,
                    apply a proposal, catch up), behind the narrow FlowHost protocol the main screen implements
    revert_flow.py  revert one version's change (r in Changes) as a flow, with its conflict
    state.py        DocumentState: draft, base version, dirty flag, in-flight write (no Textual)
    calls.py        backend calls as run on worker threads, each returning an outcome (no Textual)
    changes_calls.py  the revision list's pages and diffs (Changes) as run on worker threads (no Textual)
    assistant_calls.py  sends, AI switch and proposal previews as run on worker threads (no Textual)
    blame_calls.py  blame, revert and a conversation's receipts as run on worker threads (no Textual)
    forget_calls.py forgetting and key rotation (backend.forgetting) as run on worker threads (no Textual)
    conversation.py this session's conversation and how receipts and tool outcomes are worded (no Textual)
    messages.py     the messages that carry worker outcomes back to the UI
    text.py         diffs, sizes, times and locations as people read them (no Textual)
    keys.py         every key of the frame, read from the BINDINGS: the help screen's and the README's table
    modal.py        Modal, the base of every modal screen: it binds Help, so their footers show it (keymap applied)
    screens/        memory.py (the main screen, host of the flows), changes.py (revisions, diffs, search, Undo,
                    forgetting),
                    assistant.py (the Assistant pane), proposals.py (Apply or Dismiss), mode.py (the switcher),
                    help.py (F1), blame.py (b in Changes: each line's version, who and when), budget.py
                    (ctrl+b: bytes per top-level heading)
    widgets/        editor.py (the Markdown editor with its preview), status.py (status bar, size meter),
                    footer.py (Help and Quit first, so they fit 80 columns)
    dialogs/        Save/Discard/Cancel, Clear confirmation, the conflict views (revert_conflict.py too),
                    "are you sure?" (confirm.py), the warning before a Save over the bound (over_bound.py), and
                    forget.py (f and k in Changes: what goes, asked first; a rotation on a worker; its receipt)
    memframe.tcss   the main screen's styles (each side screen carries its own)

Side screens talk to the main screen only by message (`ProposalsScreen.Apply`,
`AssistantScreen.CatchUp`, …); no module of the frame imports another in a
circle (tests/tui/test_imports.py). The screenshot command lives with the tests
(`python -m tests.tui.screenshots DIR`), since its scenarios are the snapshot tests'.

The frame talks to nothing but a `memframe.backend.base.Backend`.
"""
