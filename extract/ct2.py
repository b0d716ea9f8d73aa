"""Reader for CTranslate2 model files (``model.bin``).

The format is little-endian::

    u32 version, str spec_name, u32 revision, u32 n_vars,
    n_vars x (str name, u8 rank, u32 dims[rank], u8 dtype, u32 nbytes, bytes),
    u32 n_aliases, n_aliases x (str alias, str target)

where a ``str`` is ``u16 length`` (including the trailing NUL), the bytes and the NUL.
Only the parts needed to rebuild a PyTorch model are decoded; quantized int8 weights
would need their scales and are rejected with a clear error.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from extract.errors import UserError

CT2_DTYPES = {
    0: np.dtype("<f4"),
    1: np.dtype("i1"),
    2: np.dtype("<i2"),
    3: np.dtype("<i4"),
    4: np.dtype("<f2"),
    5: None,  # bfloat16: decoded by hand below, numpy has no such dtype
}


class CT2FormatError(UserError, ValueError):
    """The bytes are not a CTranslate2 model file this reader understands."""


@dataclass
class CT2Model:
    version: int
    spec: str
    revision: int
    variables: dict[str, np.ndarray] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.variables[self.aliases.get(name, name)]

    def scalar(self, name: str) -> int:
        return int(self[name].reshape(()))


class _Cursor:
    def __init__(self, buffer: bytes, source: str):
        self.buffer = memoryview(buffer)
        self.offset = 0
        self.source = source

    def take(self, fmt: str):
        values = struct.unpack("<" + fmt, self.raw(struct.calcsize("<" + fmt)))
        return values if len(values) > 1 else values[0]

    def raw(self, nbytes: int) -> memoryview:
        if self.offset + nbytes > len(self.buffer):
            raise CT2FormatError(f"{self.source}: truncated at byte {self.offset}")
        chunk = self.buffer[self.offset : self.offset + nbytes]
        self.offset += nbytes
        return chunk

    def string(self) -> str:
        length = self.take("H")
        data = bytes(self.raw(length))
        if length == 0 or data[-1] != 0:
            raise CT2FormatError(f"{self.source}: bad string at byte {self.offset - length}")
        return data[:-1].decode("utf-8")


def _decode(raw: memoryview, dtype_code: int, dims: tuple[int, ...], name: str, source: str) -> np.ndarray:
    if dtype_code not in CT2_DTYPES:
        raise CT2FormatError(f"{source}: variable {name} has unknown dtype code {dtype_code}")
    if dtype_code == 5:
        as_u16 = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        array = as_u16.view(np.float32)
    else:
        array = np.frombuffer(raw, dtype=CT2_DTYPES[dtype_code])
    expected = int(np.prod(dims)) if dims else 1
    if array.size != expected:
        raise CT2FormatError(f"{source}: variable {name} has {array.size} values for shape {dims}")
    return array.reshape(dims)


def parse_ct2(buffer: bytes, source: str = "<bytes>") -> CT2Model:
    """Parse a whole CTranslate2 ``model.bin`` held in memory."""
    cursor = _Cursor(buffer, source)
    version = cursor.take("I")
    if version < 5:
        raise CT2FormatError(f"{source}: CTranslate2 binary version {version} is older than 5 and not supported")
    model = CT2Model(version=version, spec=cursor.string(), revision=cursor.take("I"))
    for _ in range(cursor.take("I")):
        name = cursor.string()
        rank = cursor.take("B")
        dims = tuple(cursor.take("I" * rank)) if rank > 1 else ((cursor.take("I"),) if rank == 1 else ())
        dtype_code = cursor.take("B")
        nbytes = cursor.take("I")
        model.variables[name] = _decode(cursor.raw(nbytes), dtype_code, dims, name, source)
    for _ in range(cursor.take("I")):
        alias = cursor.string()
        model.aliases[alias] = cursor.string()
    if cursor.offset != len(buffer):
        raise CT2FormatError(f"{source}: {len(buffer) - cursor.offset} trailing bytes after the aliases")
    return model
