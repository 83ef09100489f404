"""Read one IDX file (the MNIST / Fashion-MNIST format), gzipped or not, with strict checks.

Format (http://yann.lecun.com/exdb/mnist/, "THE IDX FILE FORMAT"): two zero bytes, a type code byte
(0x08 = unsigned byte), a byte with the number of dimensions, then one big-endian uint32 per dimension,
then the values in row-major order. We read it with numpy rather than through torchvision because
torchvision's reader neither checks that the payload length matches the header nor lets us name the bad
file in a user-facing error.
"""

from __future__ import annotations

import gzip
import math
import zlib
from pathlib import Path

import numpy as np

UNSIGNED_BYTE = 0x08  # the only type code Fashion-MNIST uses, for images and labels alike
_HEADER_PREFIX = 4  # two zero bytes, type code, number of dimensions
_DIM_BYTES = 4  # each size is a big-endian uint32


class IdxError(ValueError):
    """The file is not a well-formed IDX file of the expected kind; the message names the file."""


def read_idx(path: Path, ndim: int) -> np.ndarray:
    """Decode ``path`` (``.gz`` or raw) into a writable uint8 array with ``ndim`` dimensions."""
    data = _read_bytes(path)
    dims = _parse_header(path, data, ndim)
    offset = _HEADER_PREFIX + _DIM_BYTES * ndim
    expected = math.prod(dims)
    if len(data) - offset != expected:
        raise IdxError(
            f"{path}: header promises {expected} values {dims} but the file holds {len(data) - offset} "
            "(truncated or corrupt)"
        )
    # Copy so the array owns writable memory (np.frombuffer over bytes is read-only, which makes
    # torch.from_numpy warn downstream).
    return np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(dims).copy()  # dims from the header


def _read_bytes(path: Path) -> bytes:
    if path.suffix != ".gz":
        return path.read_bytes()
    try:
        return gzip.decompress(path.read_bytes())
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise IdxError(f"{path}: not a readable gzip file ({exc})") from exc


def _parse_header(path: Path, data: bytes, ndim: int) -> tuple[int, ...]:
    if len(data) < _HEADER_PREFIX:
        raise IdxError(f"{path}: only {len(data)} bytes, too short for an IDX header")
    zero_a, zero_b, type_code, file_ndim = data[:_HEADER_PREFIX]
    if zero_a != 0 or zero_b != 0:
        raise IdxError(f"{path}: bad magic number 0x{data[:4].hex()} (an IDX file starts with two zero bytes)")
    if type_code != UNSIGNED_BYTE:
        raise IdxError(f"{path}: IDX type code 0x{type_code:02x}, expected 0x08 (unsigned byte)")
    if file_ndim != ndim:
        raise IdxError(f"{path}: IDX file has {file_ndim} dimensions, expected {ndim}")
    end = _HEADER_PREFIX + _DIM_BYTES * ndim
    if len(data) < end:
        raise IdxError(f"{path}: header cut short ({len(data)} bytes)")
    return tuple(int(size) for size in np.frombuffer(data, dtype=">u4", count=ndim, offset=_HEADER_PREFIX))
