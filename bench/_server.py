"""The HTTP figure's server: `python -m bench._server DB WORKSPACES`.

Builds its own workspaces (key sessions live in this process's RAM), starts
uvicorn on 127.0.0.1 and prints one JSON line: the URL and a credential per
workspace. Runs until terminated.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time

import uvicorn

from bench.data import admit_many, create_workspaces, memory_text, new_service, open_key_sessions
from memframe.api import create_app
from memframe.core.types import Mode


def main(db: str, count: int) -> None:
    service = new_service(db)
    spaces = create_workspaces(service, count, text=memory_text(8 * 1024 - 64), mode=Mode.AUTO, ai=True)
    open_key_sessions(service, spaces)
    admit_many(service, spaces, 1)
    # IPPROTO_TCP named explicitly: asyncio sets TCP_NODELAY only on such sockets, and without
    # it every keep-alive request waits out a 40 ms delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(create_app(service), lifespan="off", log_config=None, access_log=False, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.005)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    print(json.dumps({"url": url, "credentials": [(ws.id, ws.admissions[0].credential) for ws in spaces]}), flush=True)
    thread.join()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
