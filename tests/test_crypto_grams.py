"""`crypto.TextGrams`: a client's count of a text's 8-byte windows, and the zlib floor it proves.

The promises: the count after any run of edits is exactly the text's (so the floor is never
computed from a stale count), the floor is never above what zlib makes of the text (even for the
most compressible texts), and a payload chosen with the count is byte for byte the one chosen by
compressing the whole text, so sealing with it never stores more.
"""

from __future__ import annotations

import random
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from memframe import crypto

KEY = bytes(range(32))


def distinct_windows(data: bytes) -> int:
    return len({data[i : i + crypto.TextGrams.Q] for i in range(len(data) - crypto.TextGrams.Q + 1)})


def _edit(rng: random.Random, text: bytes, alphabet: bytes) -> bytes:
    at = rng.randrange(len(text) + 1)
    cut = rng.randrange(0, min(80, len(text) - at) + 1)
    new = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 90)))
    return text[:at] + new + text[at + cut :]


TEXTS = {
    "notes": "".join(f"- a remembered fact number {n}, with some words around it\n" for n in range(130)).encode(),
    "one letter": b"a" * 8000,
    "a short loop": b"abc" * 2700,
    "random bytes": random.Random(1).randbytes(8000),
    "tiny": b"- tea\n",
    "empty": b"",
}


def test_the_count_follows_every_edit_exactly_and_the_floor_stays_under_zlib() -> None:
    for name, start in TEXTS.items():
        rng = random.Random(name)
        alphabet = bytes(set(start)) or b"ab"
        grams = crypto.TextGrams()
        text = start
        floor = grams.follow(b"", text)
        for _ in range(60):
            assert len(grams._counts) == distinct_windows(text), name
            assert floor <= len(zlib.compress(text, 6)), name
            assert floor <= len(zlib.compress(text, 9)) and floor <= len(zlib.compress(text, 1)), name
            edited = _edit(rng, text, alphabet)
            floor = grams.follow(text, edited)
            text = edited


def test_a_count_of_another_text_is_started_again() -> None:
    grams = crypto.TextGrams()
    grams.follow(b"", TEXTS["notes"])
    other = TEXTS["a short loop"]
    grams.follow(b"not the text counted", other)
    assert grams.data == other and len(grams._counts) == distinct_windows(other)


def test_an_edit_followed_back_leaves_the_count_it_started_from() -> None:
    """A capture's seal that does not land follows its edit back, for the next seal made from the
    same head: the count is then exactly the head's again."""
    grams = crypto.TextGrams()
    head = TEXTS["notes"]
    floor = grams.follow(b"", head)
    rng = random.Random(3)
    for _ in range(20):
        edited = _edit(rng, head, b"xyz- \n")
        assert grams.follow(head, edited) == crypto.TextGrams().follow(b"", edited)
        assert grams.follow(edited, head) == floor
        assert grams.data == head and len(grams._counts) == distinct_windows(head)


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(sorted(TEXTS)),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 100), st.binary(max_size=120)), max_size=12),
)
def test_a_payload_chosen_with_the_count_is_the_one_compressing_chooses(
    name: str, edits: list[tuple[int, int, bytes]]
) -> None:
    grams = crypto.TextGrams()
    text = TEXTS[name]
    grams.follow(b"", text)
    for at, cut, new in edits:
        at = at % (len(text) + 1)
        edited = text[:at] + new + text[at + cut :]
        assert crypto._payload(edited, (1, text), grams) == crypto._payload(edited, (1, text))
        text = edited


def test_sealing_with_the_count_opens_to_the_same_texts() -> None:
    rng = random.Random(7)
    texts = [TEXTS["notes"].decode()]
    for _ in range(70):  # past a keyframe, which the count follows too
        texts.append(_edit(rng, texts[-1].encode(), b"abcdef \n-").decode())
    grams = crypto.TextGrams()
    blobs: list[bytes] = []
    for version, text in enumerate(texts, start=1):
        blobs.append(
            crypto.seal(
                KEY,
                text,
                workspace_id="w",
                path="p",
                version=version,
                previous=blobs[-1] if blobs else None,
                previous_text=texts[version - 2] if blobs else None,
                grams=grams,
            )
        )
    assert grams.data == texts[-1].encode()
    stored = dict(enumerate(blobs, start=1))
    open_blob = crypto.opener(KEY, workspace_id="w", path="p", fetch=stored.get)
    assert [open_blob(blob, version) for version, blob in stored.items()] == texts
