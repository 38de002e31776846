"""The error statuses each route documents in the OpenAPI schema, all in the one error shape."""

from __future__ import annotations

from typing import Any

from memframe.wire.base import ErrorOut

_DESCRIBED = {
    400: "A request refused before any route read it: a single-valued header sent twice, both "
    "Content-Length and Transfer-Encoding, or HTTP the server cannot parse.",
    401: "No token, or a token that is not valid (revoked or unknown).",
    403: "MEMORY_NAMESPACE_RESERVED: automation may not touch the memory namespace, in any spelling.",
    404: "No such workspace (or not a member: the same answer), file or revision.",
    409: "A conflict: the base version or the expected policy revision is stale; nothing changed.",
    413: "The request body is over the server's limit.",
    408: "The request's headers or body did not arrive within the server's read timeout.",
    422: "Malformed input: bad base64, a negative version, an unknown mode, a bad path, "
    'a value of the wrong type (no coercion: `"1"` is not a number), an unknown field.',
    431: "The request head (request line and headers) grew past 16 KiB before it was complete.",
    501: "A transfer coding other than chunked.",
    503: "The server is at its connection limit, or a service it needs is unavailable; try again.",
}

#: What the HTTP edge (`memframe.api.edge`, `memframe.api.server`) can answer on any route.
EDGE_STATUSES = (400, 408, 431, 501, 503)


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses a route can answer."""
    return {status: {"model": ErrorOut, "description": _DESCRIBED[status]} for status in statuses}
