"""`memframe mcp`: the workspace's notes and Assistant as an MCP server over stdio.

    memframe mcp [--workspace W] [--remote URL --token T] [--model-url URL]

An MCP client (an editor, a desktop assistant) starts this command and speaks
JSON-RPC on its stdin/stdout. It gets document tools and `ask_agent`, never the
memory (see memframe/mcp_server.py). Start-up stays light: the `mcp` package
is imported only when the command runs.

A passphrase-wrapped key is read from $MEMFRAME_PASSPHRASE only: stdin is the
protocol, so there is no prompt. A failure to open the workspace prints one
line on stderr and exits non-zero before any protocol traffic.
"""

from __future__ import annotations

import argparse
from typing import Any


def cmd_mcp(args: argparse.Namespace) -> int:
    from memframe.backend.workspaces import open_backend
    from memframe.cli import model_from_args
    from memframe.mcp_server import serve_stdio

    model = model_from_args(args)
    # A missing workspace or key fails here, fast; a missing `mcp` package fails in serve_stdio,
    # which closes the backend either way.
    backend = open_backend(args.workspace, remote_url=args.remote, token=args.token, prompt=None, model=model)
    return serve_stdio(backend)


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add `mcp` to the memframe command; `common` brings --workspace, --remote and --token."""
    help_ = "serve the workspace's notes and Assistant to an MCP client over stdio (never the memory)"
    p = subparsers.add_parser("mcp", parents=[common], help=help_, description=help_)
    p.add_argument(
        "--model-url",
        help="for a local workspace: the Assistant's OpenAI-compatible model server "
        "(default: the built-in scripted model, which quotes the memory it was given)",
    )
    p.add_argument("--model", default="default", help="the model name to ask the model server for")
    from memframe.cli import add_model_arguments

    add_model_arguments(p)
    p.set_defaults(handler=cmd_mcp)
