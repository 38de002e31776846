"""The HTTP service: FastAPI routes over `memframe.service`, nothing more.

`create_app(service)` builds the app; `memframe serve` runs it under uvicorn.
"""

from memframe.api.app import create_app

__all__ = ["create_app"]
