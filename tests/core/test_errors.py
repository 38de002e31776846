"""The error tree survives the wire: every class comes back as itself, with its own fields."""

from __future__ import annotations

from typing import Any

import pytest

from memframe.core.errors import (
    KeySessionUnavailable,
    MemframeError,
    ModelUnavailable,
    PolicyConflict,
    Unavailable,
    VersionConflict,
    error_classes,
    error_from_payload,
)


def _example(cls: type[MemframeError], message: str) -> MemframeError:
    """One instance of `cls`, with whatever arguments its constructor takes."""
    if issubclass(cls, VersionConflict):
        return cls(7, message)
    if issubclass(cls, PolicyConflict):
        return cls(3, "auto", message)
    return cls(message, reasons=["the policy is still Auto"])


def _same(sent: MemframeError, got: MemframeError) -> None:
    assert type(got) is type(sent)
    assert (got.status, got.code, got.message, got.details) == (sent.status, sent.code, sent.message, sent.details)
    assert got.to_payload() == sent.to_payload()


@pytest.mark.parametrize("cls", error_classes(), ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("message", ["A clear line of our own.", ""], ids=["message", "default"])
def test_every_error_round_trips_through_its_payload(cls: type[MemframeError], message: str) -> None:
    sent = _example(cls, message)
    _same(sent, error_from_payload(sent.status, sent.to_payload()))


@pytest.mark.parametrize("cls", error_classes(), ids=lambda cls: cls.__name__)
def test_an_error_without_a_message_carries_one_line_not_its_docstring(cls: type[MemframeError]) -> None:
    error = _example(cls, "")
    assert error.args == (error.message,)
    assert error.message and "\n" not in error.message
    assert str(error) == error.message


def test_every_class_in_the_module_is_registered_under_a_code_of_its_own() -> None:
    import memframe.core.errors as errors

    defined = {
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, MemframeError) and value is not MemframeError
    }
    assert defined <= set(error_classes())
    codes = [cls.code for cls in error_classes()]
    assert len(codes) == len(set(codes))


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Classes a test defines register into a copy, not the registry the rest of the run uses."""
    import memframe.core.errors as errors

    monkeypatch.setattr(errors, "_BY_CODE", dict(errors._BY_CODE))


@pytest.mark.usefixtures("registry")
def test_a_subclass_defined_anywhere_is_rebuilt_as_itself() -> None:
    class QuotaSpent(MemframeError):
        """The workspace spent its quota."""

        code = "test_quota_spent"
        status = 429

    sent = QuotaSpent("No more today.", resets_at=1234)
    _same(sent, error_from_payload(429, sent.to_payload()))


@pytest.mark.usefixtures("registry")
def test_a_subclass_without_a_code_of_its_own_is_refused() -> None:
    with pytest.raises(TypeError, match="own error code"):

        class Nameless(Unavailable):
            """Would be sent as 'unavailable' and read back as its parent."""


@pytest.mark.usefixtures("registry")
def test_a_code_that_already_names_a_class_is_refused() -> None:
    with pytest.raises(TypeError, match="already names Unavailable"):

        class Impostor(MemframeError):
            """Claims a code that is taken."""

            code = "unavailable"


def test_a_closed_key_session_and_a_model_outage_are_not_the_server_being_unreachable() -> None:
    key = error_from_payload(409, {"error": "key_session_unavailable", "message": "Open a new key session."})
    model = error_from_payload(502, {"error": "model_unavailable", "message": ""})
    assert isinstance(key, KeySessionUnavailable) and not isinstance(key, Unavailable)
    assert isinstance(model, ModelUnavailable) and not isinstance(model, Unavailable)
    # The model server, not the memory service; and it claims nothing about memory, since a capture
    # earlier in the same turn may have committed (the turn reports that beside the failure).
    assert "model server" in model.message and "memory service" not in model.message
    assert "not changed" not in model.message


@pytest.mark.parametrize(
    ("status", "payload", "expected"),
    [
        (500, {"error": "internal", "message": "The server failed unexpectedly; see its log."}, Unavailable),
        (500, {"error": "error", "message": ""}, Unavailable),
        (502, "<html>bad gateway</html>", Unavailable),
        (418, None, Unavailable),
    ],
)
def test_what_is_not_one_of_ours_reads_as_unavailable(status: int, payload: Any, expected: type) -> None:
    error = error_from_payload(status, payload)
    assert type(error) is expected and error.message
