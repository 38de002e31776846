"""`memframe mcp`: the workspace's notes and Assistant as an MCP server over stdio.

    memframe mcp [--workspace W] [--remote URL --token-file PATH] [--model-url URL]

An MCP client (an editor, a desktop assistant) starts this command and speaks
JSON-RPC on its stdin/stdout. It gets document tools and `ask_agent`, never the
memory (see memframe/mcp/). Start-up stays light: the `mcp` package is imported
only when the command runs.

A passphrase-wrapped key is read from $MEMFRAME_PASSPHRASE only: stdin is the
protocol, so there is no prompt. A failure to open the workspace prints one
line on stderr and exits non-zero before any protocol traffic.
"""

from __future__ import annotations

import argparse
from typing import Any

from memframe.cli.options import add_command, add_model_options, model_client
from memframe.settings import Settings


def cmd_mcp(args: argparse.Namespace) -> int:
    from memframe.backend.workspaces import open_backend
    from memframe.mcp.server import serve_stdio

    # A missing workspace or key fails here, fast; a missing `mcp` package fails in serve_stdio,
    # which closes the backend either way.
    backend = open_backend(
        args.workspace,
        remote_url=args.remote,
        token=args.token,
        prompt=None,
        model=model_client(args),
        grounded_capture=args.settings.grounded_capture,
    )
    return serve_stdio(backend)


def register(sub: Any, common: argparse.ArgumentParser, settings: Settings) -> None:
    """Add `mcp` to the memframe command."""
    help_ = "serve the workspace's notes and Assistant to an MCP client over stdio (never the memory)"
    p = add_command(sub, common, "mcp", cmd_mcp, help_)
    add_model_options(p, settings, purpose="for a local workspace: the Assistant's")
