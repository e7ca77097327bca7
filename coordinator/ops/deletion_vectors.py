"""Reading a Delta deletion vector: the row indexes of a data file its DV marks deleted (Delta's PROTOCOL.md,
"Deletion Vector Format"), for the compaction's purge (coordinator/ops/compaction.py). Standard library only.

A DV is stored in a file (``storageType`` ``u``: relative, ``p``: absolute) at ``offset`` as a 4-byte big-endian
length, the serialized bitmap, and a CRC-32; or inline (``i``) as the Z85 text of the bitmap. The bitmap is a
``RoaringBitmapArray`` in its portable form: the magic number 1681511377, the number of 32-bit bitmaps (8 bytes),
then per bitmap its key (the high 32 bits of the row index, 4 bytes) and a 32-bit Roaring bitmap in the portable
serialization of the RoaringFormatSpec (array, bitmap and run containers). Little-endian throughout but the
length and the CRC.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from typing import Any

from client.contract.layout import deletion_vector_file, z85_decode

MAGIC = 1681511377
_COOKIE_RUNS = 12347
_COOKIE_NO_RUNS = 12346
_NO_OFFSET_THRESHOLD = 4


class DeletionVectorError(ValueError):
    """A deletion vector that cannot be read (the reason is the message)."""


def _roaring32(buf: bytes, pos: int) -> tuple[list[int], int]:
    """The values of one portable 32-bit Roaring bitmap at ``buf[pos:]`` and the position after it."""
    (cookie,) = struct.unpack_from("<I", buf, pos)
    pos += 4
    if cookie & 0xFFFF == _COOKIE_RUNS:
        size = (cookie >> 16) + 1
        flags = buf[pos:pos + (size + 7) // 8]
        pos += (size + 7) // 8
        runs = [bool(flags[i // 8] >> (i % 8) & 1) for i in range(size)]
    elif cookie == _COOKIE_NO_RUNS:
        (size,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        runs = [False] * size
    else:
        raise DeletionVectorError(f"not a portable Roaring bitmap (cookie {cookie})")
    header = [struct.unpack_from("<HH", buf, pos + 4 * i) for i in range(size)]
    pos += 4 * size
    if cookie == _COOKIE_NO_RUNS or size >= _NO_OFFSET_THRESHOLD:
        pos += 4 * size  # the containers' offsets: they follow one another anyway
    values: list[int] = []
    for (key, card_minus_one), is_run in zip(header, runs, strict=True):
        high = key << 16
        if is_run:
            (n,) = struct.unpack_from("<H", buf, pos)
            pos += 2
            for start, length in struct.iter_unpack("<HH", buf[pos:pos + 4 * n]):
                values.extend(range(high + start, high + start + length + 1))
            pos += 4 * n
        elif card_minus_one + 1 <= 4096:
            n = card_minus_one + 1
            values.extend(high + v for v in struct.unpack_from(f"<{n}H", buf, pos))
            pos += 2 * n
        else:
            words = struct.unpack_from("<1024Q", buf, pos)
            pos += 8192
            for w, word in enumerate(words):
                while word:
                    low = word & -word
                    values.append(high + w * 64 + low.bit_length() - 1)
                    word ^= low
    return values, pos


def deleted_rows(data: bytes) -> list[int]:
    """The row indexes of a serialized ``RoaringBitmapArray`` (magic number first), ascending."""
    if len(data) < 12 or struct.unpack_from("<I", data, 0)[0] != MAGIC:
        raise DeletionVectorError("not a deletion vector in the portable format (magic number)")
    (count,) = struct.unpack_from("<q", data, 4)
    pos = 12
    out: list[int] = []
    for _ in range(count):
        (key,) = struct.unpack_from("<I", data, pos)
        values, pos = _roaring32(data, pos + 4)
        out.extend((key << 32) | v for v in values)
    return sorted(out)


def _stored(raw: bytes, offset: int, size: int) -> bytes:
    """The bitmap stored at ``offset`` of a DV file: its length and CRC-32 checked."""
    (length,) = struct.unpack_from(">I", raw, offset)
    data = raw[offset + 4:offset + 4 + length]
    if length != size or len(data) != length:
        raise DeletionVectorError(f"the stored length {length} differs from sizeInBytes {size}")
    (crc,) = struct.unpack_from(">I", raw, offset + 4 + length)
    if zlib.crc32(data) != crc:
        raise DeletionVectorError("its checksum does not match")
    return data


async def read_deletion_vector(backend: Any, location: str, dv: Mapping[str, Any]) -> list[int]:
    """The row indexes ``dv`` (an ``add``'s ``deletionVector``) marks deleted, checked against its cardinality.
    Raises DeletionVectorError, OSError (storage)."""
    kind = dv.get("storageType")
    if kind == "i":
        try:
            data = z85_decode(str(dv.get("pathOrInlineDv") or ""))[:int(dv.get("sizeInBytes") or 0)]
        except ValueError as e:
            raise DeletionVectorError(f"its inline text is not Z85: {e}") from None
    elif kind in ("u", "p"):
        where = deletion_vector_file(kind, dv.get("pathOrInlineDv"))
        uri = where if kind == "p" else f"{location}/{where}"
        data = _stored(await backend.read(uri), int(dv.get("offset") or 0), int(dv.get("sizeInBytes") or 0))
    else:
        raise DeletionVectorError(f"unknown storageType {kind!r}")
    rows = deleted_rows(data)
    if len(rows) != int(dv.get("cardinality") or 0):
        raise DeletionVectorError(f"it holds {len(rows)} row(s), its cardinality says {dv.get('cardinality')}")
    return rows


__all__ = ["DeletionVectorError", "deleted_rows", "read_deletion_vector"]
