"""The HTTP service: FastAPI routes over `memframe.service`, nothing more.

`create_app(service)` builds the app; `memframe serve` runs it under uvicorn.
The app is imported lazily, so a client that only reads the wire schemas
(`memframe.api.schemas`, `memframe.api.assistant_schemas`) never loads FastAPI.
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
