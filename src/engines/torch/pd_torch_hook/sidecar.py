"""The decoder's sidecar (src/wire/sidecar-format.ts, written by `pd-bridge export-weights`):
sidecar.json plus weights.safetensors. Checked here: the format tag, the weights' size and SHA-256,
the exact tensor set, and the rope fingerprints recomputed from the parameters (which proves our
inverse frequencies equal the exporter's bit for bit). The geometry fingerprint is taken as the
JSON states it (the TypeScript loader recomputes it; its hash of the store's geometry is not ported)."""
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Dict, List

import numpy as np

from . import st_format
from .mlx_math import RoundingError, check_rounding
from .rope import rope_fingerprint

SIDECAR_FORMAT = 'pd-bridge-sidecar/1'
# The cache arithmetics this hook computes (src/wire/sidecar-format.ts CACHE_MATHS).
CACHE_MATHS = ('decoder', 'mlx-cpu')
LAYER_TYPES = ('sliding_attention', 'compressed_sparse_attention', 'heavily_compressed_attention')


class SidecarError(ValueError):
    pass


@dataclass
class Sidecar:
    dir: str
    json: dict
    # Every kv-path weight as float32 values (bf16 codes widened exactly), by transformers' name
    # (empty for an mlx-cpu sidecar, whose weights are MLX's quantized codes: see `raw`).
    weights: Dict[str, np.ndarray]
    # The weights file's arrays as stored (BF16 as uint16 codes) and its metadata.
    raw: Dict[str, np.ndarray] = field(default_factory=dict)
    metadata: Dict[str, str] = field(default_factory=dict)

    @property
    def cache_math(self) -> str:
        """The cache arithmetic the sidecar was exported for: `decoder` (no cacheMath field) or its name."""
        math = self.json.get('cacheMath')
        return 'decoder' if math is None else str(math.get('name'))

    @property
    def fingerprint(self) -> str:
        return self.json['fingerprint']

    @property
    def profile(self) -> dict:
        return self.json['profile']

    @property
    def num_layers(self) -> int:
        return len(self.json['layers'])

    @property
    def layer_types(self) -> List[str]:
        return [l['layerType'] for l in self.json['layers']]


def load_sidecar(directory: str) -> Sidecar:
    path = os.path.join(directory, 'sidecar.json')
    with open(path, encoding='utf-8') as f:
        js = json.load(f)
    fail = lambda field, problem: SidecarError(f'{path}: {field}: {problem}')  # noqa: E731
    if js.get('format') != SIDECAR_FORMAT:
        raise fail('format', f'is {js.get("format")!r}, this reader knows only {SIDECAR_FORMAT}')
    for i, layer in enumerate(js['layers']):
        if layer['index'] != i or layer['layerType'] not in LAYER_TYPES:
            raise fail(f'layers.{i}', f'{layer!r} is not layer {i} of a known type')
    rq = js['profile']['referenceQuant']
    if any(rq.values()):
        raise fail('profile.referenceQuant', f'{rq}: the DeepSeek reference round trips (fp8, Hadamard + fp4) are not ported to the torch hook')
    wpath = os.path.join(directory, js['weights']['file'])
    with open(wpath, 'rb') as f:
        blob = f.read()
    if len(blob) != js['weights']['bytes']:
        raise fail('weights.bytes', f'{wpath} is {len(blob)} bytes, the sidecar says {js["weights"]["bytes"]}')
    digest = hashlib.sha256(blob).hexdigest()
    if digest != js['weights']['sha256']:
        raise fail('weights.sha256', f'{wpath} hashes to {digest}, the sidecar says {js["weights"]["sha256"]}')
    metadata, raw = st_format.read(wpath)
    if sorted(raw) != sorted(js['weights']['tensors']):
        raise fail('weights.tensors', f'{wpath} holds {sorted(raw)}, the sidecar lists {sorted(js["weights"]["tensors"])}')
    for kind in LAYER_TYPES:
        ours = rope_fingerprint(js['ropeParameters'][kind], js['maxPositionEmbeddings'])
        if ours != js['ropeFingerprints'][kind]:
            raise fail(f'ropeFingerprints.{kind}', f'is {js["ropeFingerprints"][kind]}, the parameters give {ours} here')
    math = js.get('cacheMath')
    if math is not None:
        if not isinstance(math, dict) or math.get('name') != 'mlx-cpu':
            raise fail('cacheMath', f'is {math!r}; this hook computes the cache math {", ".join(CACHE_MATHS)} (decoder: no cacheMath field)')
        try:
            check_rounding(math.get('rounding'), 'rounding')
        except RoundingError as e:
            raise fail('cacheMath', str(e)) from None
        # MLX's layout (uint32 codes, e8m0 bytes, bf16): mlx_kv_path.py reads it as stored.
        return Sidecar(dir=directory, json=js, weights={}, raw=raw, metadata=metadata)
    weights = {}
    for name, arr in raw.items():
        if arr.dtype == np.uint16:
            weights[name] = st_format.bf16_codes_to_f32(arr)
        elif arr.dtype == np.float32:
            weights[name] = arr.astype(np.float32)
        else:
            raise fail('weights', f'tensor {name} is {arr.dtype}; a sidecar holds BF16 and F32')
    return Sidecar(dir=directory, json=js, weights=weights, raw=raw, metadata=metadata)
