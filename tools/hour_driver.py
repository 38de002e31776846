"""Drive a real Memory frame in tmux for an hour, as a person would, and log what the pane shows.

Not a test: a verification harness for issue 21's "an hour of simulated use". It expects a tmux
session (default `hour`) already showing `memframe frame` against a server started with
`--key-session-idle 60`, and the CLI configured (MEMFRAME_URL, MEMFRAME_TOKEN, MEMFRAME_WORKSPACE,
MEMFRAME_HOME) for the same workspace, so the CLI is "another client".

    python tools/hour_driver.py --minutes 62 --log /tmp/hour

Every step writes the pane to LOG/NNNN-step.txt and appends one line to LOG/driver.log; anything
that looks wrong (a traceback, the key-session error left on screen, the status bar's second line or
the footer's Help/Quit missing, a remote change not shown within a few seconds) is a `PROBLEM` line.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import time
from pathlib import Path

SESSION = "hour"
LOG = Path("/tmp/hour")
START = time.monotonic()
_count = 0
problems: list[str] = []


def stamp() -> str:
    """Minutes and seconds since the driver started, for the log."""
    elapsed = time.monotonic() - START
    return f"{int(elapsed // 60):02d}:{int(elapsed % 60):02d}"


def log(line: str) -> None:
    """One line in driver.log (and on stdout)."""
    text = f"[{stamp()} {time.strftime('%H:%M:%S', time.gmtime())}Z] {line}"
    print(text, flush=True)
    with (LOG / "driver.log").open("a") as out:
        out.write(text + "\n")


def problem(what: str) -> None:
    """Something a person would call wrong: logged loudly and kept for the summary."""
    problems.append(f"{stamp()} {what}")
    log(f"PROBLEM {what}")


def keys(*names: str) -> None:
    """Key names as tmux spells them (Enter, Escape, F2, C-s)."""
    subprocess.run(["tmux", "send-keys", "-t", SESSION, *names], check=True)


def type_text(text: str) -> None:
    """Literal text, typed; a newline is the Enter key, as a terminal sends it."""
    for index, line in enumerate(text.split("\n")):
        if index:
            keys("Enter")
        if line:
            subprocess.run(["tmux", "send-keys", "-t", SESSION, "-l", "--", line], check=True)


def pane() -> str:
    """What the terminal shows now."""
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", SESSION], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


def cli(*args: str, stdin: str | None = None) -> str:
    """The other client: the memframe CLI against the same server and workspace."""
    done = subprocess.run(["memframe", *args], input=stdin, capture_output=True, text=True, timeout=120)
    out = (done.stdout + done.stderr).strip()
    log(f"cli {' '.join(args)} -> rc={done.returncode} {out.splitlines()[0] if out else ''}")
    return out


def server_version() -> int:
    """The head version as the CLI sees it."""
    match = re.search(r"^version (\d+)", cli("show"), re.M)
    return int(match.group(1)) if match else -1


def snap(step: str, where: str = "editor") -> str:
    """Capture the pane to a numbered file and check it for what must never show."""
    global _count
    _count += 1
    text = pane()
    (LOG / f"{_count:04d}-{step}.txt").write_text(text)
    lines = text.rstrip("\n").split("\n")
    if "Traceback" in text or "Error:" in text:
        problem(f"{step}: a traceback or error on screen")
    if "key session is closed" in text:
        problem(f"{step}: the key-session error is on screen")
    last = lines[-1] if lines else ""
    if "Help" not in last or ("Quit" not in last and "Close help" not in last and where != "dialog"):
        problem(f"{step}: footer cut or missing Help/Quit: {last.strip()!r}")
    if where == "editor" and not any(w in text.split("\n", 2)[1] if text.count("\n") > 1 else "" for w in
                                     ("Version", "Not loaded")):  # fmt: skip
        problem(f"{step}: the status bar's second line is missing")
    return text


def wait_for(predicate_text: str, seconds: float, step: str, where: str = "editor") -> tuple[bool, float, str]:
    """Poll the pane (no key press) until `predicate_text` shows; how long it took."""
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        text = pane()
        if predicate_text in text:
            took = time.monotonic() - began
            return True, took, snap(step, where)
        time.sleep(0.5)
    return False, seconds, snap(step, where)


def idle(seconds: float, why: str) -> None:
    """A person away from the keyboard; longer than the server's 60 s idle means an eviction."""
    log(f"idle {seconds:.0f}s ({why})")
    time.sleep(seconds)


def status_version(text: str) -> int:
    """The version the status bar's second line shows."""
    match = re.search(r"Version (\d+)", text)
    return int(match.group(1)) if match else -1


# --- what a person does --------------------------------------------------------------------------


def edit_and_save(n: int) -> None:
    """Type a line at the end of the memory and Save; the acknowledged version shows."""
    before = server_version()
    keys("C-End")
    type_text(f"\n- Hour note {n}, typed at {time.strftime('%H:%M:%S', time.gmtime())}.")
    time.sleep(1)
    snap(f"edit{n}")
    keys("C-s")
    ok, took, text = wait_for(f"Version {before + 1}", 10, f"saved{n}")
    if not ok or "✓ Saved" not in text:
        problem(f"save {n}: expected Version {before + 1} and ✓ Saved")
    else:
        log(f"save {n}: version {before + 1} acknowledged after {took:.1f}s")


def assistant_turn(message: str, step: str, expect: str = "was used") -> str:
    """F2, send one message, wait for its receipt, escape back to the editor."""
    keys("F2")
    time.sleep(2)
    type_text(message)
    keys("Enter")
    began = time.monotonic()
    time.sleep(1.5)
    text = pane()
    while time.monotonic() - began < 60:
        text = pane()
        # Answered: the pending "sending…" line is gone and a receipt shows (or the key-session error).
        if "key session is closed" in text or ("sending…" not in text and "receipt" in text):
            break
        time.sleep(0.5)
    took = time.monotonic() - began
    text = snap(step, "assistant")
    receipt = [line for line in text.splitlines() if "receipt:" in line]
    log(f"turn {step}: {took:.1f}s; last receipt {receipt[-1].strip() if receipt else None!r}")
    if not receipt or expect not in " ".join(text.split()):
        problem(f"turn {step}: expected {expect!r} in the answer's receipt")
    keys("Escape")
    time.sleep(1.5)
    snap(f"{step}-back")
    return text


def remote_mode_change(to: str, label: str) -> None:
    """Another client changes the mode; the frame shows it within a few seconds, no key pressed."""
    cli("mode", to)
    ok, took, _ = wait_for(f"Mode {label}", 15, f"mode-{to}")
    if ok:
        log(f"remote mode {to}: shown after {took:.1f}s without a key press")
    else:
        problem(f"remote mode {to}: not shown within 15s")


def remote_save(n: int) -> None:
    """Another client saves; with no draft open, the frame shows the new version by itself."""
    before = server_version()
    current = cli("show").split("─" * 40, 1)[-1].lstrip("\n")
    cli("save", "-", "--base", str(before), stdin=current.rstrip("\n") + f"\n- Saved by the CLI, round {n}.\n")
    ok, took, text = wait_for(f"Version {before + 1}", 15, f"remote-save{n}")
    if ok:
        shows_text = f"Saved by the CLI, round {n}." in text
        log(f"remote save {n}: Version {before + 1} shown after {took:.1f}s; its text in the editor: {shows_text}")
    else:
        problem(f"remote save {n}: the frame did not show version {before + 1} within 15s")


def conflict_take_theirs(n: int) -> None:
    """A draft here, a Save elsewhere, Save here: conflict; take theirs; then a recall provides memory."""
    keys("C-End")
    type_text(f"\n- Draft {n} that will lose the race.")
    time.sleep(1)
    before = server_version()
    current = cli("show").split("─" * 40, 1)[-1].lstrip("\n")
    cli("save", "-", "--base", str(before), stdin=current.rstrip("\n") + f"\n- Won the race, round {n}.\n")
    _, took, text = wait_for("is newer", 15, f"conflict{n}-notice")
    log(f"conflict {n}: notice beside the draft after {took:.1f}s: "
        f"{[line.strip() for line in text.splitlines()[:2]]}")  # fmt: skip
    if "newer" not in text:
        problem(f"conflict {n}: no 'version {before + 1} is newer' beside the draft")
    keys("C-s")
    time.sleep(3)
    snap(f"conflict{n}-dialog", "dialog")
    keys("d")
    time.sleep(2)
    text = snap(f"conflict{n}-confirm", "dialog")
    if "y" in text:
        keys("y")
    time.sleep(3)
    text = snap(f"conflict{n}-taken")
    if f"Won the race, round {n}." not in text:
        problem(f"conflict {n}: the editor does not show their text after taking it")
    if f"Version {before + 1}" not in text:
        problem(f"conflict {n}: status bar does not show version {before + 1} after taking theirs")
    assistant_turn(f"after the conflict {n}, what do you know?", f"conflict{n}-recall", expect="was used")


def remember_in_auto(n: int) -> None:
    """In Auto, `remember:` writes through the server's fence; the frame shows the new version."""
    before = server_version()
    assistant_turn(f"remember: the hour check number {n} passed", f"remember{n}")
    after = server_version()
    shown = cli("show")
    if after != before + 1 or f"the hour check number {n} passed" not in shown:
        problem(f"remember {n}: server version {before} -> {after}; line present: "
                f"{f'the hour check number {n} passed' in shown}")  # fmt: skip
    ok, took, _ = wait_for(f"Version {after}", 15, f"remember{n}-editor")
    log(f"remember {n}: version {before} -> {after}; editor shows it after {took:.1f}s ({ok})")
    if not ok:
        problem(f"remember {n}: the editor did not show version {after}")


def browse_changes(n: int) -> None:
    """Changes: move, whole text, home/end, back."""
    keys("C-g")
    time.sleep(3)
    snap(f"changes{n}", "changes")
    for _ in range(4):
        keys("Down")
    time.sleep(1)
    keys("v")
    time.sleep(1.5)
    snap(f"changes{n}-text", "changes")
    keys("v", "End")
    time.sleep(2)
    snap(f"changes{n}-end", "changes")
    keys("Home")
    time.sleep(1.5)
    text = snap(f"changes{n}-home", "changes")
    title = [line for line in text.splitlines() if "revision" in line.lower()][:1]
    log(f"changes {n}: {title}")
    keys("Escape")
    time.sleep(1.5)
    snap(f"changes{n}-back")


def resize_round(n: int) -> None:
    """Shrink to 60x20 and back to 80x24; the status bar and footer stay whole."""
    subprocess.run(["tmux", "resize-window", "-t", SESSION, "-x", "60", "-y", "20"], check=True)
    time.sleep(3)
    text = snap(f"resize{n}-60x20")
    if len(text.splitlines()[0]) > 60:
        problem(f"resize {n}: the pane did not shrink")
    keys("F1")
    time.sleep(2)
    snap(f"resize{n}-60x20-help", "help")
    keys("Escape")
    time.sleep(1)
    subprocess.run(["tmux", "resize-window", "-t", SESSION, "-x", "80", "-y", "24"], check=True)
    time.sleep(3)
    snap(f"resize{n}-80x24")


def help_round(n: int) -> None:
    """F1 on the editor, escape closes it."""
    keys("F1")
    time.sleep(2)
    text = snap(f"help{n}", "help")
    if "Help" not in text:
        problem(f"help {n}: no help screen")
    keys("Escape")
    time.sleep(1.5)
    snap(f"help{n}-closed")


def main() -> None:
    """The hour: edit, idle past the eviction, talk, and one other thing per round."""
    global SESSION, LOG
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=62)
    parser.add_argument("--log", type=Path, default=LOG)
    parser.add_argument("--session", default=SESSION)
    parser.add_argument("--first-round", type=int, default=1, help="continue a run that was restarted")
    parser.add_argument("--gap", type=float, default=75, help="idle seconds between turns (> server idle)")
    args = parser.parse_args()
    SESSION, LOG = args.session, args.log
    LOG.mkdir(parents=True, exist_ok=True)
    log(f"start: {args.minutes} minutes, {args.gap}s gaps")
    snap("start")
    extras = [
        lambda n: remote_mode_change("auto", "Auto"),
        remember_in_auto,
        remote_save,
        conflict_take_theirs,
        browse_changes,
        resize_round,
        help_round,
        lambda n: remote_mode_change("read-only", "Read only"),
    ]
    n = args.first_round - 1
    turns = 0
    while time.monotonic() - START < args.minutes * 60:
        n += 1
        log(f"--- round {n}")
        edit_and_save(n)
        idle(args.gap, "past the key-session idle: the next turn crosses an eviction")
        assistant_turn(f"what do you know? (round {n})", f"turn{n}")
        turns += 1
        extra = extras[(n - 1) % len(extras)]
        log(f"extra: {getattr(extra, '__name__', 'mode')}")
        extra(n)
        idle(args.gap, "away again")
    log(f"done: {n} rounds, {turns} plain turns, problems: {len(problems)}")
    for line in problems:
        log(f"  {line}")


if __name__ == "__main__":
    main()
