"""`memframe model check`: probe a model server the way memframe will use it, one line per check.

A server that is up can still fail a person in ways a chat window never shows: an empty answer
under one chat format, a tool call that does not parse, a stream cut off by a second request, a
context too small for the memory. Each check here sends what the runtime sends (its system
prompt, the current memory's recall block, its tools, the configured tool choice) through the
same client (`OpenAIChatModel`), and says what to change where it fails.

Checks, in order: the server is reachable; it knows the model; a question is answered from memory
(a small memory with a fact planted for this probe, a name made up for it, framed as every call
frames memory: the answer must name it, beyond reciting the memory, and not be empty or repeat its
prompt, which is what a model given a chat format it was not trained on does); a forced `remember_in_memory` call parses
as edits (judged only where `tool_choice` forces a tool: otherwise shown, not failed); a streamed
answer ends with its end marker; the context window holds the prompt with the current memory and
`max_tokens`. A check that cannot be judged (the server does not say) is reported as such and does
not fail. The module runs past 400 lines because every check is a method over one probe's shared
state (the server's model list, the prompts), kept together in the order the checks run.
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from memframe.assistant.automation import Automation
from memframe.assistant.document_tools import DocumentTools
from memframe.assistant.memory_tool import SCHEMA as MEMORY_TOOL
from memframe.assistant.models import Message
from memframe.assistant.openai_chat import ModelOptions, OpenAIChatModel
from memframe.assistant.runtime import SYSTEM_PROMPT
from memframe.core.edits import parse_changes
from memframe.core.errors import MemframeError
from memframe.core.grounding import unsupported_lines
from memframe.core.recall import recall_status_for_text, render_recall_block
from memframe.core.types import MEMORY_RECALL_MAX_BYTES, RecallStatus, utf8_size

__all__ = ["Check", "run_checks"]

#: The probe's memory and question: a fact as a person's memory holds one, asked as a person asks it.
PROBE_MEMORY = "# Memory\n- The user's cat is called {name}\n"
PROBE_QUESTION = "What is my cat called?"
#: Tries of the probe, each with a new name and boundary, until an answer names it: a small model
#: answers some prompts and not others (see README, "Recommended local set-up").
PROBE_TRIES = 3
CAPTURE_MESSAGE = "Please remember this: my cat is called Miso."
#: Tokens a full memory costs, per KiB: the contract's measure for mixed Japanese/English Markdown.
TOKENS_PER_KIB = 300
#: A prompt longer than any context a model server on one machine is given, to make it name its own.
_OVERSIZED_WORDS = 1 << 17
_CONTEXT_IN_ERROR = re.compile(r"context window of (\d+)|maximum context length is (\d+)", re.IGNORECASE)
#: What to change when the model's own tool call is unusable: memframe refuses it and writes nothing.
_SMALL_MODEL = "a larger model; memframe refuses such a call and writes nothing"
#: The calls of a check answer briefly: enough for an end marker, not a whole essay on two cores.
_CHECK_MAX_TOKENS = 48
#: An answer whose first this many characters (spacing and case aside) stand in its own prompt repeats
#: the prompt instead of answering: no answer to the plain question starts with that much of it.
_ECHO_CHARS = 40
#: What to change when the answer is empty or repeats the prompt: the server's chat format, or the model.
_CHAT_FORMAT_FIX = (
    "a chat format the model follows (llama-cpp-python: a pretrained model such as the README's Gemma 3 270M "
    "answers under --chat_format redpajama-incite; an instruction-tuned one under its own, e.g. --chat_format "
    "gemma with --system-as-user here), or a larger model"
)


@dataclass(frozen=True)
class Check:
    """One check's verdict: True passed, False failed, None could not be judged."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""

    def line(self) -> str:
        mark = {True: "ok  ", False: "FAIL", None: "??  "}[self.ok]
        tail = f" -> {self.fix}" if self.fix and self.ok is not True else ""
        return f"{mark} {self.name}: {self.detail}{tail}"


def run_checks(
    options: ModelOptions,
    *,
    memory: str = "",
    transport: Any = None,
    say: Callable[[Check], None] | None = None,
) -> list[Check]:
    """Every check against the server `options` names, with `memory` as the current memory text.

    `say` hears each check as it is judged (a model on a small machine takes a while per call).
    A server that cannot be reached ends the run after its one line."""
    probe = _Probe(options, memory, transport)
    checks: list[Check] = []
    try:
        for step in (probe.reachable, probe.model_known, probe.plain, probe.forced_tool, probe.stream, probe.context):
            check = step()
            checks.append(check)
            if say is not None:
                say(check)
            if step == probe.reachable and check.ok is False:
                break
    finally:
        probe.close()
    return checks


class _Probe:
    """The state the checks share: the server's model list and the prompt memframe would send."""

    def __init__(self, options: ModelOptions, memory: str, transport: Any) -> None:
        import httpx

        self.options = options
        self.transport = transport
        headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else {}
        self.http = httpx.Client(
            base_url=options.url.rstrip("/"), headers=headers, timeout=options.timeout, transport=transport
        )
        self.models: list[dict[str, Any]] | None = None
        self.memory = memory
        self.tools = [MEMORY_TOOL, *(schema for schema, _ in DocumentTools(cast(Automation, None)).tools())]
        block = None
        if recall_status_for_text(memory) is RecallStatus.PROVIDED:
            block = render_recall_block(
                status=RecallStatus.PROVIDED, text=memory, revision=1, workspace="check", bound_to="check/0"
            )
        self.system = _system(block)

    def close(self) -> None:
        self.http.close()

    def _client(self, **changes: Any) -> OpenAIChatModel:
        brief = min(self.options.max_tokens, _CHECK_MAX_TOKENS)
        options = dataclasses.replace(self.options, **{"max_tokens": brief, **changes})
        return OpenAIChatModel(options, transport=self.transport)

    def _messages(self, text: str, system: str | None = None) -> list[Message]:
        return [{"role": "system", "content": system or self.system}, {"role": "user", "content": text}]

    def _probe_messages(self, name: str) -> list[Message]:
        """The probe question with a small memory naming `name`, recall-framed as the runtime frames it."""
        block = render_recall_block(
            status=RecallStatus.PROVIDED,
            text=PROBE_MEMORY.format(name=name),
            revision=1,
            workspace="check",
            bound_to="check/0",
        )
        return self._messages(PROBE_QUESTION, _system(block))

    # --- the checks ----------------------------------------------------------------------

    def reachable(self) -> Check:
        import httpx

        name = "reachable"
        try:
            response = self.http.get("/models")
        except httpx.HTTPError as exc:
            return Check(
                name,
                False,
                f"{self.options.url} cannot be reached ({type(exc).__name__})",
                "start the model server, or point --model-url (or [model] url) at it",
            )
        if response.status_code in (401, 403):
            return Check(name, False, f"the server refused the API key ({response.status_code})", "$MEMFRAME_MODEL_KEY")
        if response.status_code == 200:
            try:
                data = response.json().get("data")
                self.models = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else None
            except (ValueError, AttributeError):
                self.models = None
        return Check(name, True, f"{self.options.url} answers (GET /models: {response.status_code})")

    def model_known(self) -> Check:
        name = "model known"
        if self.models is None:
            return Check(name, None, "the server lists no models at GET /models, so the name cannot be checked")
        ids = [str(m.get("id")) for m in self.models]
        if self.options.name in ids:
            return Check(name, True, f"{self.options.name!r} is served")
        offered = ", ".join(repr(i) for i in ids[:5]) or "nothing"
        fix = f"--model {ids[0]!r} (or [model] name)" if ids else "load a model on the server"
        if len(ids) == 1:
            fix += ", or start llama-cpp-python with --model_alias to give it a short name"
        return Check(name, False, f"the server serves {offered}, not {self.options.name!r}", fix)

    def plain(self) -> Check:
        """A question answered from memory, asked as the runtime asks: memory framed in the system
        message, tools and the configured tool choice; a tool call first is answered with a harmless
        result, as the runtime answers it. A missed name is asked again (a new name, a new boundary);
        an empty answer or an echo of the prompt fails at once: a chat format makes those every time."""
        name = "answer from memory"
        client = self._client(stream=False)
        word = shown = ""
        try:
            for attempt in range(1, PROBE_TRIES + 1):
                word = probe_name()
                messages = self._probe_messages(word)
                reply = client.complete(messages, self.tools)
                if reply.tool_calls:
                    messages = [*messages, *_answered(reply.tool_calls)]
                    reply = client.complete(messages, self.tools)
                text = " ".join((reply.content or "").split())
                shown = text if len(text) <= 60 else text[:59] + "…"
                if not text:
                    again = " (the model called a tool again instead of answering)" if reply.tool_calls else ""
                    fix = "llama-cpp-python's chatml-function-calling with tool choice auto answers nothing; use "
                    return Check(name, False, f"the answer was empty{again}", fix + _CHAT_FORMAT_FIX)
                if _repeats_prompt(text, messages):
                    return Check(name, False, f"the answer repeats its prompt: {shown!r}", _CHAT_FORMAT_FIX)
                if _names(text, word):
                    tries = "" if attempt == 1 else f" (try {attempt} of {PROBE_TRIES})"
                    return Check(name, True, f"{shown!r} names {word!r} from memory{tries}")
        except MemframeError as exc:
            return Check(name, False, str(exc), _fix_for(str(exc)))
        finally:
            client.close()
        return Check(
            name,
            False,
            f"{PROBE_TRIES} answers missed the name in memory; the last, for {word!r}: {shown!r}",
            ("" if self.options.temperature == 0 else "--temperature 0; ") + _CHAT_FORMAT_FIX,
        )

    def forced_tool(self) -> Check:
        """A forced capture fails the run only where memframe forces one (tool_choice names the tool);
        under any other tool choice its verdict is shown, not judged: no call memframe makes needs it."""
        check = self._forced_tool()
        if check.ok is not False or self.options.tool_choice not in ("auto", "none"):
            return check
        unused = f"not used with tool_choice {self.options.tool_choice!r}; forced, {check.detail}"
        return dataclasses.replace(check, ok=None, detail=unused)

    def _forced_tool(self) -> Check:
        name = "forced tool call"
        client = self._client(stream=False, tool_choice="remember_in_memory", max_tokens=self.options.max_tokens)
        try:
            reply = client.complete(self._messages(CAPTURE_MESSAGE), self.tools)
        except MemframeError as exc:
            return Check(name, False, str(exc), _fix_for(str(exc)))
        finally:
            client.close()
        calls = [c for c in reply.tool_calls if c.name == "remember_in_memory"]
        if not calls:
            return Check(
                name,
                False,
                "asked to call remember_in_memory, the model did not",
                "a server that honours a forced tool_choice (llama-cpp-python constrains it with a grammar)",
            )
        call = calls[0]
        if call.malformed:
            return Check(name, False, f"the call did not parse: {call.malformed}", _SMALL_MODEL)
        try:
            changes = parse_changes(call.arguments)
        except MemframeError as exc:
            return Check(name, False, f"the call's edits are refused: {exc}", _SMALL_MODEL)
        first = changes[0]
        grounded = "; not in the person's words" if unsupported_lines(CAPTURE_MESSAGE, changes) else ""
        written = first.new_line if first.op == "replace" else first.line
        return Check(name, True, f"{first.op} {written!r}{grounded}")

    def stream(self) -> Check:
        """A streamed answer, read here event by event: it must end with a finish_reason."""
        import httpx

        name = "stream end"
        if not self.options.stream:
            return Check(name, None, "not checked: --no-stream asks for whole answers")
        client = self._client()
        body = client.request_body(self._probe_messages(probe_name()), [], stream=True)
        client.close()
        finish: str | None = None
        events = 0
        done = False
        try:
            with self.http.stream("POST", "/chat/completions", json=body) as response:
                if response.status_code != 200:
                    response.read()
                    return Check(name, False, f"streaming was refused ({response.status_code})", "--no-stream")
                if "text/event-stream" not in response.headers.get("content-type", ""):
                    return Check(name, True, "the server answers whole even when asked to stream; memframe reads it")
                for line in response.iter_lines():
                    data = line[5:].strip() if line.startswith("data:") else None
                    if data is None:
                        continue
                    if data == "[DONE]":
                        done = True
                        break
                    events += 1
                    for choice in _choices(data):
                        finish = choice.get("finish_reason") or finish
        except httpx.HTTPError as exc:
            return Check(name, False, f"the stream broke ({type(exc).__name__})", "--no-stream")
        if finish is None:
            return Check(
                name,
                False,
                f"{events} events{' and [DONE]' if done else ''}, but no finish_reason: the server ended it early",
                "llama-cpp-python: --interrupt_requests false (another request cut this one off); or --no-stream",
            )
        return Check(name, True, f"finish_reason {finish!r}{' and [DONE]' if done else ''}")

    def context(self) -> Check:
        name = "context window"
        needed_now, full = self._needed()
        if needed_now is None:
            return Check(name, None, "the server did not count the prompt's tokens (no usage in its answer)")
        window = self._window()
        plan = f"prompt + current memory + max_tokens {self.options.max_tokens} = {needed_now} tokens"
        plan += f"; a full {MEMORY_RECALL_MAX_BYTES // 1024} KiB memory needs about {full}"
        if window is None:
            return Check(name, None, f"the server does not say its window; {plan}", f"give it at least {full}")
        if window < needed_now:
            return Check(name, False, f"{window} < {plan}", f"llama-cpp-python: --n_ctx {full}; or --max-tokens lower")
        if window < full:
            return Check(name, True, f"{window} holds {plan}", f"--n_ctx {full} for a full memory")
        return Check(name, True, f"{window} holds {plan}")

    # --- what the context check asks --------------------------------------------------------

    def _needed(self) -> tuple[int | None, int]:
        """Tokens the runtime's first call needs now, and (estimated) with a full memory."""
        import httpx

        client = self._client(stream=False, max_tokens=1)
        body = client.request_body(self._messages(PROBE_QUESTION), self.tools, stream=False)
        client.close()
        try:
            response = self.http.post("/chat/completions", json=body)
            prompt = int(response.json()["usage"]["prompt_tokens"])
        except (httpx.HTTPError, ValueError, KeyError, TypeError):  # the server did not count
            return None, 0
        room = max(0, MEMORY_RECALL_MAX_BYTES - utf8_size(self.memory))
        more = -(-room * TOKENS_PER_KIB // 1024)
        return prompt + self.options.max_tokens, prompt + more + self.options.max_tokens

    def _window(self) -> int | None:
        """The server's context window where it says it: vLLM's max_model_len, llama.cpp's /props,
        or llama-cpp-python's refusal of a prompt longer than any window (refused before any work)."""
        import httpx

        for model in self.models or []:
            if model.get("id") == self.options.name and isinstance(model.get("max_model_len"), int):
                return int(model["max_model_len"])
        root = self.options.url.rstrip("/").removesuffix("/v1")
        try:
            props = self.http.get(f"{root}/props").json()
            n_ctx = props.get("default_generation_settings", {}).get("n_ctx") or props.get("n_ctx")
            if isinstance(n_ctx, int):
                return n_ctx
        except (httpx.HTTPError, ValueError, AttributeError):  # no /props: not llama.cpp's own server
            pass
        if not _is_llama_cpp_python(self.models):
            return None
        oversized = {
            "model": self.options.name,
            "messages": [{"role": "user", "content": "memframe " * _OVERSIZED_WORDS}],
            "max_tokens": 1,
        }
        try:
            said = self.http.post("/chat/completions", json=oversized).text
        except httpx.HTTPError:
            return None
        found = _CONTEXT_IN_ERROR.search(said)
        return None if found is None else int(found.group(1) or found.group(2))


def _answered(calls: Sequence[Any]) -> list[Message]:
    """The runtime's two messages after a tool call: the call, and a result that did nothing."""
    return [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw_arguments or "{}"}}
                for c in calls
            ],
        },
        *(
            {"role": "tool", "tool_call_id": c.id, "content": "Not run (memframe model check): nothing was done."}
            for c in calls
        ),
    ]


def probe_name() -> str:
    """A name made up for one probe (three random syllables, capitalised): no model knows it
    beforehand, so an answer that names it read it from memory."""
    return "".join(secrets.choice("bdfgklmnprstvz") + secrets.choice("aeiou") for _ in range(3)).capitalize()


def _names(answer: str, name: str) -> bool:
    """Whether the answer names `name` outside a recital of the memory line that holds it: a model
    that runs on into the memory it was given has not answered from it."""
    recital = PROBE_MEMORY.format(name=name).splitlines()[-1].removeprefix("- ").casefold()
    return name.casefold() in answer.casefold().replace(recital, "")


def _system(block: str | None) -> str:
    """The runtime's system message: its prompt, then the recall block where memory is provided."""
    return SYSTEM_PROMPT if block is None else f"{SYSTEM_PROMPT}\n\n{block}"


def _repeats_prompt(answer: str, messages: Sequence[Message]) -> bool:
    """Whether the answer starts with a stretch of its own prompt (spacing and case aside)."""
    start = " ".join(answer.split())[:_ECHO_CHARS].casefold()
    prompt = " ".join(" ".join(str(m.get("content") or "") for m in messages).split()).casefold()
    return len(start) == _ECHO_CHARS and start in prompt


def _choices(data: str) -> list[dict[str, Any]]:
    try:
        choices = json.loads(data).get("choices") or []
    except (ValueError, AttributeError):
        return []
    return [c for c in choices if isinstance(c, dict)]


def _is_llama_cpp_python(models: list[dict[str, Any]] | None) -> bool:
    """llama-cpp-python lists its models as owned by "me" with no permissions."""
    return bool(models) and all(m.get("owned_by") == "me" and m.get("permissions") == [] for m in models or [])


def _fix_for(message: str) -> str:
    if "did not answer in time" in message:
        return "--model-timeout longer (a small machine takes a while per call)"
    if "cannot be reached" in message:
        return "start the model server, or fix --model-url"
    if "/chat/completions" in message:
        return "--model-url ending in /v1"
    return "see the server's own log"
