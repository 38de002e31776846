"""Key files are read without json or base64: each hand-written reader must agree with the library it stands in for."""

from __future__ import annotations

import base64
import itertools
import json

from memframe import crypto, keyfiles


def test_a_key_file_is_read_as_json_reads_it() -> None:
    key = crypto.new_key()
    raw = keyfiles.encode_key_file(key, "notes-1.x")
    assert keyfiles._as_written(raw) == json.loads(raw)
    assert keyfiles.decode_key_file(raw) == key
    assert keyfiles._as_written(keyfiles.encode_key_file(key, "n", "a passphrase long enough")) is None
    for other in [b"{}", b"{\n}\n", b'{\n  "a": "b",\n}\n', b'{\n  "a": "b\\n"\n}\n', b'{\n  "a": "b": "c"\n}\n']:
        doc = keyfiles._as_written(other)
        assert doc is None or doc == json.loads(other)
    assert keyfiles._as_written(b'{\n  "a": "b",\n  "a": "c"\n}\n') == {"a": "c"}


def test_base64_is_decoded_as_base64_decodes_it() -> None:
    texts = ["", "QUJD\n", "é", "QUJDRA=="] + [
        "".join(p) for n in range(1, 6) for p in itertools.product("Q=A/", repeat=n)
    ]
    for text in texts:
        try:
            expected: object = base64.b64decode(text, validate=True)
        except ValueError as exc:
            expected = type(exc)
        try:
            got: object = keyfiles._b64decode(text)
        except ValueError as exc:
            got = type(exc)
        assert got == expected, repr(text)
