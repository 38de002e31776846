"""What every wire model shares: camelCase names, strict base64, the one error shape.

Field names are camelCase on the wire (`restoredFrom`, `expectedRevision`, as
the contract spells them); error details keep the snake_case names
`memframe.core.errors` gives them.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel

#: Versions and revisions fit in SQLite's INTEGER and in a JavaScript number.
MAX_NUMBER = 2**53 - 1

_Core = TypeVar("_Core")


def decode_base64(value: str) -> bytes:
    """Strict base64: anything but the standard alphabet with correct padding is refused."""
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ValueError("not valid base64 (standard alphabet, padded)") from None


def encode_base64(blob: bytes | None) -> str | None:
    return None if blob is None else base64.b64encode(blob).decode("ascii")


def _sealed_text(value: Any) -> Any:
    """Sealed bytes from a core record go out as base64; a string (an answer read back) must be base64."""
    if isinstance(value, bytes):
        return encode_base64(value)
    if isinstance(value, str):
        decode_base64(value)
    return value


#: Ciphertext on the wire: base64 text, built from the bytes a core record holds.
Sealed = Annotated[str, BeforeValidator(_sealed_text)]


class WireOut(BaseModel):
    """An answer: read from a core dataclass by attribute, sent with camelCase aliases."""

    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True, from_attributes=True
    )

    def to_core(self, cls: type[_Core], **given: Any) -> _Core:
        """The core dataclass this answer describes (the reverse of `model_validate(record)`).

        Each of the dataclass's fields is taken from this model by name unless `given`; a
        nested answer converts its own parts and passes them in `given`.
        """
        names = (f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
        return cls(**{name: getattr(self, name) for name in names if name not in given}, **given)


class WireIn(BaseModel):
    """A request: camelCase names only; an unknown field is an error, not ignored,
    so a client that sends something the server must never receive (a plaintext, a key)
    is told so instead of having it silently dropped.

    Strict: a value is taken only in the type the schema names. `"yes"`, `"on"` or `1`
    is not a boolean and `"1"` is not a number; a client that sends them has a bug
    the server should name, not guess past.
    """

    model_config = ConfigDict(alias_generator=to_camel, extra="forbid", strict=True)


class ErrorOut(BaseModel):
    """Every error: a stable code, one readable line, and the code's own details."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": True})

    error: str = Field(description="A stable code, e.g. `version_conflict` or `not_found`.")
    message: str = Field(description="One line a person can read.")


class Health(BaseModel):
    status: str
    version: str
