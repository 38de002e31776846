"""The error statuses each route documents in the OpenAPI schema, all in the one error shape."""

from __future__ import annotations

from typing import Any

from memframe.wire.base import ErrorOut

_DESCRIBED = {
    401: "No token, or a token that is not valid (revoked or unknown).",
    403: "MEMORY_NAMESPACE_RESERVED: automation may not touch the memory namespace, in any spelling.",
    404: "No such workspace (or not a member: the same answer), file or revision.",
    409: "A conflict: the base version or the expected policy revision is stale; nothing changed.",
    413: "The request body is over the server's limit.",
    422: "Malformed input: bad base64, a negative version, an unknown mode, a bad path.",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses a route can answer."""
    return {status: {"model": ErrorOut, "description": _DESCRIBED[status]} for status in statuses}
