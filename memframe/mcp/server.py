"""The stdio MCP server around `memframe.mcp.tools.NoteTools`: the only module that imports `mcp`.

The `mcp` package is imported only by `build_server`, when `memframe mcp`
actually starts.

No `from __future__ import annotations` here: the MCP SDK reads the tool
wrappers' signatures (built inside `build_server`, where `pydantic.Field` is a
local name) to publish their input and output schemas.
"""

from typing import TYPE_CHECKING, Any

from memframe.core.errors import MCPUnavailable, MemframeError
from memframe.mcp.tools import INSTRUCTIONS, NoteTools, ToolText, error_line

if TYPE_CHECKING:
    from memframe.backend.sealed import SealedBackend


def require_mcp() -> None:
    """Raise one clear line unless the MCP SDK, version 2 (`MCPServer`), is importable."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        raise MCPUnavailable("'memframe mcp' needs the MCP SDK, version 2: pip install 'mcp>=2.3,<3'.") from None


def build_server(tools: NoteTools) -> Any:
    """An MCPServer exposing exactly TOOL_NAMES over `tools`."""
    require_mcp()
    from typing import Annotated

    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import BaseModel, Field, ValidationError

    from memframe import __version__

    def ok(result: ToolText) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=result.text)], structured_content=result.data)

    def failed(line: str) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=line)], is_error=True)

    def guarded(call: Any, *args: Any) -> Any:
        """The tool's result, or its failure as one line; typed Any because each wrapper declares its
        output model (the published outputSchema) while returning the CallToolResult that carries it."""
        try:
            return ok(call(*args))
        except MemframeError as exc:
            return failed(error_line(exc))

    class Document(BaseModel):
        path: str
        version: int

    class DocumentList(BaseModel):
        documents: list[Document]

    class Hit(BaseModel):
        path: str
        version: int
        snippet: str

    class SearchResult(BaseModel):
        hits: list[Hit]
        unreadable: int

    class Note(BaseModel):
        path: str
        version: int
        text: str

    class Written(BaseModel):
        path: str
        version: int

    class ReceiptLine(BaseModel):
        call: int
        status: str
        revision: int | None
        line: str

    class OutcomeLine(BaseModel):
        tool: str
        kind: str
        line: str

    class AgentAnswer(BaseModel):
        answer: str
        conversation_id: str
        admission_id: str
        receipts: list[ReceiptLine]
        tool_outcomes: list[OutcomeLine]

    Path = Annotated[str, Field(description="The note's path in the workspace, e.g. 'projects/plan.md'.")]
    Text = Annotated[str, Field(description="The note's full Markdown text.")]

    class Server(MCPServer):  # type: ignore[misc, valid-type]
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if not isinstance(exc.__cause__, ValidationError):
                    raise
                problems = sorted(
                    {f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.__cause__.errors()}
                )
                return failed(f"invalid_input: {name} was called with bad arguments ({'; '.join(problems)}).")

    server = Server(name="memframe", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    writing = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

    @server.tool(annotations=reading)
    def list_documents() -> DocumentList:
        """List the workspace's notes with their current versions."""
        return guarded(tools.list_documents)

    @server.tool(annotations=reading)
    def search_documents(
        query: Annotated[str, Field(description="Text to look for, case-insensitive.")],
    ) -> SearchResult:
        """Find notes containing some text; returns each matching line (at most 20 notes)."""
        return guarded(tools.search_documents, query)

    @server.tool(annotations=reading)
    def read_document(path: Path) -> Note:
        """Read one note: its text and the version to pass to update_note."""
        return guarded(tools.read_document, path)

    @server.tool(annotations=writing)
    def create_note(path: Path, text: Text) -> Written:
        """Create a new note; refused if a note already exists at that path."""
        return guarded(tools.create_note, path, text)

    @server.tool(annotations=writing)
    def update_note(
        path: Path,
        text: Text,
        base_version: Annotated[int, Field(ge=1, description="The version you read; a newer one refuses the write.")],
    ) -> Written:
        """Replace a note's text, only if it is still at base_version (nothing is merged or overwritten)."""
        return guarded(tools.update_note, path, text, base_version)

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True),
        description="Ask the workspace Assistant: an ordinary turn (workspace AI must be on; memory is recalled "
        "as the workspace's mode allows). Returns the answer and which memory revision each model call used.",
    )
    def ask_agent(
        message: Annotated[str, Field(description="What to ask the workspace Assistant.")],
        conversation_id: Annotated[
            str | None, Field(description="Continue this conversation (from an earlier answer); default: a new one.")
        ] = None,
    ) -> AgentAnswer:
        return guarded(tools.ask_agent, message, conversation_id)

    return server


def serve_stdio(backend: "SealedBackend") -> int:
    """Serve MCP on stdin/stdout until the client closes stdin; the backend is closed afterwards."""
    try:
        server = build_server(NoteTools(backend))
        server.run("stdio")
    finally:
        backend.close()
    return 0
