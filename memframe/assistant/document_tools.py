"""The Assistant's tools for ordinary notes; none of them can reach the memory namespace.

`read_document`, `create_note` and `propose_edit` refuse a reserved path
before making any request, and `list_documents` / `search_documents` drop
the namespace even if a server were to return it: with memory Off, no
ordinary read can bring memory text into a turn.

Note text reaches the model with chat-template control sequences defanged
visibly (`defang_template_tokens`), as memory text does: a note cannot end the
model's turn or open a forged system turn. The stored note is not changed.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from memframe.assistant.automation import Automation
from memframe.assistant.memory_tool import TurnContext
from memframe.core.errors import MemframeError
from memframe.core.namespace import is_reserved
from memframe.core.recall import defang_template_tokens
from memframe.core.turns import OutcomeKind, ToolOutcome

Handler = Callable[[TurnContext, dict[str, Any]], ToolOutcome]
_RESERVED = "That path is inside the reserved memory namespace; notes tools cannot touch it."


def _schema(name: str, description: str, properties: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {key: {"type": "string", "description": text} for key, text in properties.items()},
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }


class DocumentTools:
    def __init__(self, automation: Automation) -> None:
        self.automation = automation

    def tools(self) -> list[tuple[dict[str, Any], Handler]]:
        return [
            (_schema("list_documents", "List the workspace's notes.", {}), self.list_documents),
            (
                _schema("search_documents", "Find notes containing some text.", {"query": "text to look for"}),
                self.search_documents,
            ),
            (_schema("read_document", "Read one note.", {"path": "the note's path"}), self.read_document),
            (
                _schema("create_note", "Create a new note.", {"path": "a new note's path", "text": "its Markdown"}),
                self.create_note,
            ),
            (
                _schema(
                    "propose_edit",
                    "Suggest replacing text in a note; a person reviews it, nothing is written.",
                    {"path": "the note", "find": "exact text to replace", "replace": "the new text"},
                ),
                self.propose_edit,
            ),
        ]

    def _guard(self, name: str, arguments: dict[str, Any], *fields: str) -> ToolOutcome | list[str]:
        values = []
        for field in fields:
            value = arguments.get(field)
            if not isinstance(value, str) or not value:
                return ToolOutcome(name, OutcomeKind.REFUSED, f"{name} needs a non-empty {field!r}.")
            values.append(value)
        if "path" in fields and is_reserved(values[0]):
            return ToolOutcome(name, OutcomeKind.REFUSED, _RESERVED)
        return values

    def list_documents(self, ctx: TurnContext, arguments: dict[str, Any]) -> ToolOutcome:
        try:
            docs = self.automation.list_documents(ctx.workspace_id, ctx.credential)
        except MemframeError as exc:
            return ToolOutcome("list_documents", OutcomeKind.ERROR, str(exc))
        visible = [f"{path} (version {version})" for path, version in docs if not is_reserved(path)]
        return ToolOutcome("list_documents", OutcomeKind.OK, "\n".join(visible) or "There are no notes.")

    def search_documents(self, ctx: TurnContext, arguments: dict[str, Any]) -> ToolOutcome:
        checked = self._guard("search_documents", arguments, "query")
        if isinstance(checked, ToolOutcome):
            return checked
        try:
            hits = self.automation.search_documents(ctx.workspace_id, ctx.credential, checked[0])
        except MemframeError as exc:
            return ToolOutcome("search_documents", OutcomeKind.ERROR, str(exc))
        lines = [f"{h.path}: {defang_template_tokens(h.snippet)}" for h in hits if not is_reserved(h.path)]
        return ToolOutcome("search_documents", OutcomeKind.OK, "\n".join(lines) or "No note contains that text.")

    def read_document(self, ctx: TurnContext, arguments: dict[str, Any]) -> ToolOutcome:
        checked = self._guard("read_document", arguments, "path")
        if isinstance(checked, ToolOutcome):
            return checked
        try:
            version, text = self.automation.read_document(ctx.workspace_id, ctx.credential, checked[0])
        except MemframeError as exc:
            return ToolOutcome("read_document", OutcomeKind.ERROR, str(exc))
        return ToolOutcome("read_document", OutcomeKind.OK, defang_template_tokens(text), version=version)

    def create_note(self, ctx: TurnContext, arguments: dict[str, Any]) -> ToolOutcome:
        checked = self._guard("create_note", arguments, "path", "text")
        if isinstance(checked, ToolOutcome):
            return checked
        try:
            info = self.automation.put_document(ctx.workspace_id, ctx.credential, checked[0], checked[1], 0)
        except MemframeError as exc:
            return ToolOutcome("create_note", OutcomeKind.ERROR, f"Not created: {exc}")
        return ToolOutcome(
            "create_note", OutcomeKind.OK, f"Created {checked[0]} (version {info.version}).", version=info.version
        )

    def propose_edit(self, ctx: TurnContext, arguments: dict[str, Any]) -> ToolOutcome:
        checked = self._guard("propose_edit", arguments, "path", "find", "replace")
        if isinstance(checked, ToolOutcome):
            return checked
        path, find, replace = checked
        try:
            version, text = self.automation.read_document(ctx.workspace_id, ctx.credential, path)
        except MemframeError as exc:
            return ToolOutcome("propose_edit", OutcomeKind.ERROR, str(exc))
        count = text.count(find)
        if count != 1:
            return ToolOutcome(
                "propose_edit", OutcomeKind.REFUSED, f"The text to replace occurs {count} times; it must occur once."
            )
        diff = "".join(
            difflib.unified_diff(
                text.splitlines(keepends=True),
                text.replace(find, replace).splitlines(keepends=True),
                f"{path} (version {version})",
                f"{path} (proposed)",
            )
        )
        diff = defang_template_tokens(diff)
        return ToolOutcome(
            "propose_edit", OutcomeKind.PROPOSED, f"Proposed for a person to review:\n{diff}", version=version
        )
