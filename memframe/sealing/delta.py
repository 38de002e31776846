"""The delta codec: a version stored as the edit from the version before it, inside the seal.

A delta is ``base(u32) || prefix(u32) || suffix(u32) || packing(1) || middle``: the text is the
base version's first `prefix` bytes, then `middle` (raw for packing 0, zlib for 1), then its
last `suffix` bytes. This module only encodes and decodes that payload; which version is the
base, and the proof that the base is the very ciphertext the header names, are the sealed
format's (`memframe.sealing.format`). Versions 1, 1 + `KEYFRAME_EVERY`, … are never deltas, so
opening any version walks at most `KEYFRAME_EVERY - 1` earlier ones.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

#: A full (non-delta) version at least this often: no read walks further back than this.
KEYFRAME_EVERY = 64
#: Texts shorter than this are never worth compressing (zlib's own overhead is about 11 bytes).
COMPRESS_FROM = 64
_HEAD = struct.Struct(">IIIB")


def keyframe(version: int) -> bool:
    """True for the versions that are always sealed whole (1, 1 + KEYFRAME_EVERY, …)."""
    return version % KEYFRAME_EVERY == 1


def compress(data: bytes) -> bytes | None:
    """zlib of `data` where that is shorter, else None."""
    if len(data) < COMPRESS_FROM:
        return None
    packed = zlib.compress(data, 6)
    return packed if len(packed) < len(data) else None


def inflate(payload: bytes | memoryview, limit: int) -> bytes:
    """The bytes `payload` (a whole zlib stream) unpacks to, at most `limit` of them; ValueError if
    it is damaged or does not end where it should."""
    try:
        unpack = zlib.decompressobj()
        data = unpack.decompress(payload, limit + 1)
        if unpack.unconsumed_tail or not unpack.eof:
            raise ValueError("the compressed text does not end where it should")
    except zlib.error as exc:
        raise ValueError("damaged compressed text") from exc
    return data


def _common_prefix(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix, found by halving (a slice comparison per step)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: bytes, b: bytes, limit: int) -> int:
    """Length of the longest common suffix, at most `limit`, halving like `_common_prefix`."""
    la, lb = len(a), len(b)
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[la - mid : la - lo] == b[lb - mid : lb - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def shared_ends(base: bytes, data: bytes) -> tuple[int, int]:
    """(prefix, suffix): the bytes `base` and `data` share at the start, then at the end of what is left."""
    prefix = _common_prefix(base, data)
    return prefix, _common_suffix(base, data, min(len(base), len(data)) - prefix)


def encode(base_version: int, base: bytes, data: bytes) -> bytes:
    """The edit from `base` (the text of `base_version`) to `data`: the shared ends kept, the middle carried."""
    prefix, suffix = shared_ends(base, data)
    middle, packing = data[prefix : len(data) - suffix], 0
    packed = compress(middle)
    if packed is not None:
        middle, packing = packed, 1
    return _HEAD.pack(base_version, prefix, suffix, packing) + middle


def decode(plain: bytes, at: int, size: int, base: Callable[[int], bytes]) -> tuple[bytes, tuple[int, int]]:
    """The text of the delta that starts at `plain[at]`, against `base(version)` (the UTF-8 text of
    the version it names), and the (prefix, suffix) it keeps of that base: what it shares with it at
    each end as the writer found them, which a reader must not take for the most it shares
    (`memframe.core.diffs.unified_diff_text` checks them). ValueError if it does not fit."""
    if len(plain) - at < _HEAD.size:
        raise ValueError("damaged delta")
    base_version, prefix, suffix, packing = _HEAD.unpack_from(plain, at)
    old = base(base_version)
    if prefix + suffix > len(old) or packing not in (0, 1):
        raise ValueError("a delta that does not fit its base")
    at += _HEAD.size
    middle = inflate(memoryview(plain)[at:], size) if packing else plain[at:]
    return old[:prefix] + middle + old[len(old) - suffix :], (prefix, suffix)
