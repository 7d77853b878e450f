"""RoPE / YaRN as src/model/rope.ts and src/model/engine/rope-tables.ts compute it: inverse
frequencies with a float32 rounding after every step (checked against the sidecar's rope
fingerprints, which hash their exact bits), cos/sin rows cos(fp32(fp32(pos) * f_k)) evaluated in
double and rounded to float32 (Python's math.cos is glibc's, ours is V8's fdlibm port; both are
within an ulp of double, so after the float32 rounding they agree except in vanishingly rare
ties: the parity suite would show one), and the interleaved rotation on the trailing slice."""
import decimal
import hashlib
import math
import struct

import numpy as np
import torch

from .fp32 import canonical_nan, round_bf16

f32 = np.float32


def _fr(x: float) -> float:
    """Math.fround."""
    return float(f32(x))


def _yarn_range(p: dict):
    original = p['originalMaxPositionEmbeddings']
    if original is None:
        return None
    dim = p['ropeDim']

    def correction_dim(beta: float) -> float:
        return (dim * math.log(original / (beta * 2 * math.pi))) / (2 * math.log(p['theta']))
    low = correction_dim(p['betaFast'])
    high = correction_dim(p['betaSlow'])
    if p['truncate']:
        low = float(math.floor(low))
        high = float(math.ceil(high))
    return max(low, 0.0) + 0.0, min(high, dim - 1.0) + 0.0


def rope_inv_freq(p: dict) -> np.ndarray:
    """ropeInvFreq: f_k = 1 / theta^(2k/dim), then YaRN's ramp when originalMaxPositionEmbeddings is set."""
    dim = p['ropeDim']
    half = dim // 2
    theta = _fr(p['theta'])
    inv = [_fr(1 / _fr(math.pow(theta, _fr((2 * k) / dim)))) for k in range(half)]
    rng = _yarn_range(p)
    if rng is not None:
        low0, high0 = rng
        high = high0 + 0.001 if low0 == high0 else high0
        span = _fr(high - low0)
        low = _fr(low0)
        factor = _fr(p['factor'])
        for k in range(half):
            ramp = min(max(_fr(_fr(k - low) / span), 0.0), 1.0)
            smooth = _fr(1 - ramp)
            interpolated = _fr(inv[k] / factor)
            inv[k] = _fr(_fr(interpolated * _fr(1 - smooth)) + _fr(inv[k] * smooth))
    return np.array(inv, dtype=np.float32)


def js_number(x) -> str:
    """A number as JavaScript's JSON.stringify writes it (shortest round trip, JS exponent rules)."""
    if isinstance(x, bool):
        raise TypeError('not a number')
    x = float(x)
    if x == 0:
        return '0'
    if x.is_integer() and abs(x) < 1e21:
        return str(int(x))
    sign = '-' if x < 0 else ''
    tup = decimal.Decimal(repr(abs(x))).normalize().as_tuple()
    digits = ''.join(map(str, tup.digits))
    point = len(digits) + tup.exponent
    k, n = len(digits), point
    if k <= n <= 21:
        body = digits + '0' * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + '.' + digits[n:]
    elif -6 < n <= 0:
        body = '0.' + '0' * (-n) + digits
    else:
        e = n - 1
        body = digits[0] + ('.' + digits[1:] if k > 1 else '') + 'e' + ('+' if e >= 0 else '-') + str(abs(e))
    return sign + body


def _js_json(v) -> str:
    if v is None:
        return 'null'
    if isinstance(v, bool):
        return 'true' if v else 'false'
    if isinstance(v, (int, float)):
        return js_number(v)
    if isinstance(v, str):
        import json
        return json.dumps(v)
    raise TypeError(f'cannot encode {v!r}')


def rope_fingerprint(p: dict, max_pos: int) -> str:
    """ropeFingerprint (src/model/rope.ts): sha256 over a tag, the parameters as JSON, the inv_freq bits."""
    keys = ['attentionFactor', 'betaFast', 'betaSlow', 'factor', 'maxPos', 'originalMaxPositionEmbeddings',
            'partialRotaryFactor', 'ropeDim', 'ropeType', 'theta', 'truncate']
    fields = dict(p, maxPos=max_pos)
    text = '{' + ','.join(f'"{k}":{_js_json(fields[k])}' for k in keys) + '}'
    inv = rope_inv_freq(p)
    h = hashlib.sha256()
    h.update(b'pd-bridge/rope-fingerprint/v1\n')
    h.update(text.encode())
    h.update(b'\n')
    h.update(inv.astype('<f4').tobytes())
    return h.hexdigest()


class RopeTable:
    """cos/sin rows [rows, ropeDim/2] of one rope kind, grown on demand (rows never change once made)."""

    def __init__(self, p: dict, inv_freq_bf16: bool, cos_sin_bf16: bool, device: torch.device):
        if p['attentionFactor'] != 1:
            raise ValueError(f"rope: attention factor {p['attentionFactor']} is not supported (DeepSeek-V4 uses 1)")
        inv = rope_inv_freq(p)
        if inv_freq_bf16:
            inv = round_bf16(torch.from_numpy(inv)).numpy()
        self.inv = [float(v) for v in inv]
        self.bf16 = cos_sin_bf16
        self.device = device
        self.cos = torch.zeros((0, len(self.inv)), dtype=torch.float32, device=device)
        self.sin = torch.zeros_like(self.cos)

    def rows(self, start: int, count: int):
        """cos, sin for positions start..start+count-1 (views of the device tables)."""
        self._ensure(start + count)
        return self.cos[start:start + count], self.sin[start:start + count]

    def _ensure(self, rows: int) -> None:
        have = self.cos.shape[0]
        if rows <= have:
            return
        target = max(rows, 2 * have, 256)
        cos = np.empty((target - have, len(self.inv)), dtype=np.float32)
        sin = np.empty_like(cos)
        for r in range(have, target):
            pos = f32(r)
            for k, f in enumerate(self.inv):
                angle = float(pos * f32(f))
                cos[r - have, k] = math.cos(angle)
                sin[r - have, k] = math.sin(angle)
        c, s = torch.from_numpy(cos), torch.from_numpy(sin)
        if self.bf16:
            c, s = round_bf16(c), round_bf16(s)
        self.cos = torch.cat([self.cos, c.to(self.device)], 0)
        self.sin = torch.cat([self.sin, s.to(self.device)], 0)


def rotate_trailing(x: torch.Tensor, rope_dim: int, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """applyRopeInterleaved on the trailing rope_dim channels of every row of x [n, d], row r by
    (cos[r], sin[r]): (a, b) -> (a*c - b*s, a*s + b*c), each product and sum rounded to float32."""
    d = x.shape[1]
    nope = d - rope_dim
    pairs = x[:, nope:].reshape(x.shape[0], rope_dim // 2, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    ra = a * cos - b * sin
    rb = a * sin + b * cos
    rotated = torch.stack([ra, rb], -1).reshape(x.shape[0], rope_dim)
    return torch.cat([x[:, :nope], canonical_nan(rotated)], 1)
