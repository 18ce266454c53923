"""Read and write ``*.safetensors`` files (the Hugging Face weight format) without extra
dependencies: an 8-byte little-endian header length, a JSON header ``{name: {dtype, shape,
data_offsets}}``, then the raw bytes. Reading memory-maps the file: a tensor costs no host
memory until it is copied somewhere."""
from __future__ import annotations

import json
import mmap
import os
import struct

import torch

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}
if hasattr(torch, "float8_e4m3fn"):
    DTYPES.update(F8_E4M3=torch.float8_e4m3fn, F8_E5M2=torch.float8_e5m2)
NAMES = {v: k for k, v in DTYPES.items()}


class SafetensorsFile:
    """Lazy tensors of one file: ``f.keys()``, ``f.get(name)`` (a CPU tensor on the mapping)."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) != 8:
                raise ValueError(f"{path}: not a safetensors file (shorter than 8 bytes)")
            (n,) = struct.unpack("<Q", head)
            if n > os.path.getsize(path) - 8:
                raise ValueError(f"{path}: not a safetensors file (header length {n} exceeds the file)")
            self.header = json.loads(fh.read(n))
            self._start = 8 + n
            self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY) if os.path.getsize(path) else None
        self.metadata = self.header.pop("__metadata__", None) or {}

    def keys(self):
        return self.header.keys()

    def info(self, name: str) -> tuple:
        h = self.header[name]
        if h["dtype"] not in DTYPES:
            raise NotImplementedError(f"{self.path}: tensor {name!r} has unsupported dtype {h['dtype']}")
        return DTYPES[h["dtype"]], tuple(h["shape"])

    def get(self, name: str) -> torch.Tensor:
        dtype, shape = self.info(name)
        b, e = self.header[name]["data_offsets"]
        if e == b:
            return torch.empty(shape, dtype=dtype, device="cpu")
        buf = torch.frombuffer(self._map, dtype=torch.uint8, count=e - b, offset=self._start + b)
        return buf.view(dtype).reshape(shape)


def save(tensors: dict, path: str, metadata: dict | None = None) -> None:
    """Write ``{name: tensor}`` as one safetensors file (tensors copied to the CPU)."""
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        if t.dtype not in NAMES:
            raise TypeError(f"tensors[{name!r}]: dtype {t.dtype} cannot be stored")
        data = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for data in blobs:
            fh.write(data)
