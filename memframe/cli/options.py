"""The options several commands share, written once: workspace, remote, token, model.

Defaults come from `memframe.settings` (environment over config file), so a
command-line option beats both. Also the argument types and the one way a command
opens its workspace.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memframe.cli.output import prompt
from memframe.settings import Settings

if TYPE_CHECKING:
    from memframe.assistant.models import ModelClient
    from memframe.assistant.openai_chat import ModelOptions
    from memframe.backend.sealed import SealedBackend

Handler = Callable[[argparse.Namespace], int]


def workspace_options(settings: Settings) -> argparse.ArgumentParser:
    """A parent parser with --workspace, --remote, and --token-file or --token."""
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
    token = common.add_mutually_exclusive_group()
    token.add_argument(
        "--token-file",
        action=TokenFile,
        dest="token",
        default=argparse.SUPPRESS,  # the token's default is --token's ($MEMFRAME_TOKEN)
        metavar="PATH",
        help="read the bearer token for --remote from this file (e.g. one made 0600 with umask 077)",
    )
    token.add_argument(
        "--token",
        action=TokenOnCommandLine,
        default=settings.token,
        help="bearer token for --remote (default: $MEMFRAME_TOKEN); every local user can read it here: "
        "prefer --token-file or MEMFRAME_TOKEN",
    )
    return common


TOKEN_WARNING = (
    "memframe: warning: --token shows the token to every local user (a command line is readable by all in "
    "/proc/PID/cmdline); use --token-file PATH or MEMFRAME_TOKEN instead."
)


class TokenOnCommandLine(argparse.Action):
    """--token still works for scripts, with one warning on stderr per command line saying why not."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: str | None = None) -> None:
        if not getattr(namespace, "token_warned", False):
            print(TOKEN_WARNING, file=sys.stderr)
            namespace.token_warned = True
        namespace.token = values


class TokenFile(argparse.Action):
    """--token-file PATH: the token from a file, so it never sits in the command line. A file that is
    missing, unreadable, not text or empty is the usual one-line error (exit 1), not a usage error."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: str | None = None) -> None:
        namespace.token = read_token_file(str(values))


def read_token_file(path: str) -> str:
    """The token in the file at `path`, without surrounding whitespace (a trailing newline is usual)."""
    from memframe.core.errors import InvalidInput

    try:
        with open(path, "rb") as fh:
            raw = fh.read(4097)  # a token is short: never read a device or a huge file whole
    except OSError as exc:
        raise InvalidInput(f"Cannot read the token file {path}: {exc.strerror or exc}.") from None
    try:
        token = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        token = None
    if token is None or len(raw) > 4096 or any(c.isspace() for c in token):
        raise InvalidInput(f"The token file {path} does not hold one token (one line of text).")
    if not token:
        raise InvalidInput(f"The token file {path} is empty: put the token from 'memframe admin token create' in it.")
    return token


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
        "--temperature",
        type=temperature,
        default=settings.model_temperature,
        metavar="T",
        help="sampling temperature, 0 or more; 0 picks the likeliest words, which small models need for tool "
        "calls (default: [model] temperature, else the model server's own)",
    )
    parser.add_argument(
        "--no-stream", action="store_true", help="ask for the whole answer at once instead of streaming"
    )


def model_client(args: argparse.Namespace) -> ModelClient | None:
    """The model --model-url names (None: the built-in scripted model); its key is $MEMFRAME_MODEL_KEY.

    The settings file's [model] is the local Assistant's: with --remote the server answers with its own
    model, so only a --model-url given on the command line is taken (and refused by `open_workspace`).
    """
    if not args.model_url or (getattr(args, "remote", None) and args.model_url == args.settings.model_url):
        return None
    from memframe.assistant.openai_chat import OpenAIChatModel

    return OpenAIChatModel(model_options(args))


def model_options(args: argparse.Namespace) -> ModelOptions:
    """How to call the model the model options name (`model_client`'s, and `model check`'s)."""
    from memframe.assistant.openai_chat import ModelOptions

    return ModelOptions(
        args.model_url,
        args.model,
        api_key=args.settings.model_key,
        max_tokens=args.max_tokens,
        tool_choice=args.tool_choice,
        timeout=args.model_timeout,
        system_as_user=args.system_as_user,
        stream=not args.no_stream,
        temperature=args.temperature,
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


def temperature(value: str) -> float:
    """A sampling temperature: a number, 0 or more."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not number >= 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return number


def duration(value: str) -> float:
    """A duration as `admin token create --expires-in` takes it: a number and d, h, m or s (90d, 8h, 30m)."""
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    number, unit = value[:-1], value[-1:].lower()
    if unit not in units or not number.isdigit() or int(number) == 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a duration: use a number and d, h, m or s, e.g. 8h")
    return float(int(number) * units[unit])


def seconds(value: str) -> float:
    """A number of seconds, more than 0."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not number > 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return number
