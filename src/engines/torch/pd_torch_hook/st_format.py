"""safetensors read and write with numpy (Debian has no python3-safetensors). The writer lays a file
out exactly as src/formats/safetensors does (the reference writer's order: dtype rank descending,
then name by UTF-8 bytes; metadata keys sorted; the header padded with spaces to a multiple of 8),
so a layer file written here is byte-identical to the TypeScript hook's for the same tensors."""
import json
import struct
from typing import Dict, Tuple

import numpy as np

# Position in the reference `enum Dtype` (larger first in the layout), for the dtypes we write.
_RANK = {'BF16': 3, 'I32': 4, 'U32': 5, 'F32': 6, 'F64': 8, 'I64': 9, 'U64': 10}
_NUMPY = {'F32': '<f4', 'I64': '<i8', 'BF16': '<u2', 'I32': '<i4', 'U32': '<u4', 'F64': '<f8', 'U64': '<u8', 'U8': 'u1'}

# name -> (dtype, shape, little-endian bytes)
Tensors = Dict[str, Tuple[str, Tuple[int, ...], bytes]]


def encode(tensors: Tensors, metadata: Dict[str, str]) -> bytes:
    order = sorted(tensors, key=lambda n: (-_RANK[tensors[n][0]], n.encode('utf-8')))
    parts = []
    if metadata:
        meta = ','.join(f'{json.dumps(k)}:{json.dumps(metadata[k])}' for k in sorted(metadata, key=lambda k: k.encode('utf-8')))
        parts.append(f'"__metadata__":{{{meta}}}')
    offset = 0
    for name in order:
        dtype, shape, data = tensors[name]
        end = offset + len(data)
        parts.append(f'{json.dumps(name)}:{{"dtype":"{dtype}","shape":[{",".join(str(d) for d in shape)}],"data_offsets":[{offset},{end}]}}')
        offset = end
    header = ('{' + ','.join(parts) + '}').encode('utf-8')
    header += b' ' * (-len(header) % 8)
    return struct.pack('<Q', len(header)) + header + b''.join(tensors[n][2] for n in order)


def read(path: str):
    """(metadata, {name: numpy array}); BF16 is returned as its uint16 codes."""
    with open(path, 'rb') as f:
        blob = f.read()
    n = struct.unpack('<Q', blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    meta = header.pop('__metadata__', {})
    out = {}
    for name, info in header.items():
        b, e = info['data_offsets']
        dt = _NUMPY.get(info['dtype'])
        if dt is None:
            raise ValueError(f'{path}: tensor {name} has dtype {info["dtype"]}, which this reader does not know')
        out[name] = np.frombuffer(blob, dtype=dt, count=(e - b) // np.dtype(dt).itemsize, offset=8 + n + b).reshape(info['shape'])
    return meta, out


def bf16_codes_to_f32(codes: np.ndarray) -> np.ndarray:
    """Widen bf16 codes exactly (the code becomes the top 16 bits)."""
    return (codes.astype(np.uint32) << 16).view(np.float32)
