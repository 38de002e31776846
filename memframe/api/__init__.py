"""The HTTP service: FastAPI routes over `memframe.service`, nothing more.

`create_app(service)` builds the app; `memframe serve` runs it under uvicorn.
The request and response bodies live in `memframe.wire`, which both this
app and the remote client import; the app itself is imported lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memframe.api.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from memframe.api.app import create_app

        return create_app
    raise AttributeError(name)
