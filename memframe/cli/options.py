"""The options several commands share, written once: workspace, remote, token, model.

Defaults come from `memframe.settings` (environment over config file), so a
command-line option beats both. Also the argument types and the one way a command
opens its workspace.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memframe.cli.output import prompt
from memframe.settings import Settings

if TYPE_CHECKING:
    from memframe.assistant.models import ModelClient
    from memframe.backend.sealed import SealedBackend

Handler = Callable[[argparse.Namespace], int]


def workspace_options(settings: Settings) -> argparse.ArgumentParser:
    """A parent parser with --workspace, --remote and --token."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--workspace",
        "-w",
        default=settings.workspace,
        help="workspace name (default: $MEMFRAME_WORKSPACE, the config file's workspace, or 'default')",
    )
    common.add_argument(
        "--remote",
        default=settings.remote_url,
        metavar="URL",
        help="a memframe server (default: $MEMFRAME_URL; none = the local embedded workspace)",
    )
    common.add_argument("--token", default=settings.token, help="bearer token for --remote (default: $MEMFRAME_TOKEN)")
    return common


def add_model_options(parser: argparse.ArgumentParser, settings: Settings, *, purpose: str) -> None:
    """--model-url, --model and how to call that model; `purpose` says whose model it is, e.g. "the Assistant's".

    Each default comes from the config file's [model] table (or the model client's own default), so
    chat, serve and mcp call a model server the same way.
    """
    parser.add_argument(
        "--model-url",
        default=settings.model_url,
        help=f"{purpose} OpenAI-compatible model server, e.g. http://127.0.0.1:8080/v1 (default: the config "
        "file's [model] url, else the built-in scripted model, which quotes the memory it was given)",
    )
    parser.add_argument(
        "--model",
        default=settings.model_name,
        help="the model name to ask the model server for (default: the config file's [model] name or 'default')",
    )
    parser.add_argument(
        "--max-tokens",
        type=positive,
        default=settings.model_max_tokens or 1024,
        metavar="N",
        help="longest answer, in tokens (default: [model] max_tokens or 1024)",
    )
    parser.add_argument(
        "--tool-choice",
        default=settings.model_tool_choice or "auto",
        metavar="NAME",
        help="auto, none, required, or a tool to force on the call that answers the message, e.g. "
        "remember_in_memory for small models that never choose a tool (default: [model] tool_choice or auto)",
    )
    parser.add_argument(
        "--model-timeout",
        type=seconds,
        default=settings.model_timeout or 120.0,
        metavar="SECONDS",
        help="how long one model call may take (default: [model] timeout or 120)",
    )
    parser.add_argument(
        "--system-as-user",
        action="store_true",
        default=bool(settings.model_system_as_user),
        help="fold the system message, memory included, into the first user message "
        "(for chat formats that drop system messages, e.g. llama-cpp-python's gemma)",
    )
    parser.add_argument(
        "--no-stream", action="store_true", help="ask for the whole answer at once instead of streaming"
    )


def model_client(args: argparse.Namespace) -> ModelClient | None:
    """The model --model-url names (None: the built-in scripted model); its key is $MEMFRAME_MODEL_KEY."""
    if not args.model_url:
        return None
    from memframe.assistant.openai_chat import ModelOptions, OpenAIChatModel

    return OpenAIChatModel(
        ModelOptions(
            args.model_url,
            args.model,
            api_key=args.settings.model_key,
            max_tokens=args.max_tokens,
            tool_choice=args.tool_choice,
            timeout=args.model_timeout,
            system_as_user=args.system_as_user,
            stream=not args.no_stream,
        )
    )


def open_workspace(args: argparse.Namespace, *, model: ModelClient | None = None) -> SealedBackend:
    """The workspace the options name, local or remote."""
    from memframe.backend.workspaces import open_backend

    return open_backend(
        args.workspace,
        remote_url=args.remote,
        token=args.token,
        prompt=prompt,
        model=model,
        grounded_capture=args.settings.grounded_capture,
    )


def add_command(
    sub: Any, common: argparse.ArgumentParser, name: str, handler: Handler, help_: str
) -> argparse.ArgumentParser:
    """A subcommand with the workspace options, dispatching to `handler`."""
    parser: argparse.ArgumentParser = sub.add_parser(name, parents=[common], help=help_, description=help_)
    parser.set_defaults(handler=handler)
    return parser


def version(value: str) -> int:
    """A version number: 0 or more (0 = create-only)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a version number") from None
    if number < 0:
        raise argparse.ArgumentTypeError("a version cannot be negative")
    return number


def positive(value: str) -> int:
    """A revision number or a count: 1 or more."""
    number = version(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return number


def seconds(value: str) -> float:
    """A number of seconds, more than 0."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not number > 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return number
