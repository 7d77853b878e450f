"""MLX 0.32.2's CPU arithmetic for the cache path, element-wise on torch tensors of any device: the
rounding points as data (the sidecar's `cacheMath.rounding`), std::fma on float32, and MLX's own
Cephes exp/sin/cos (backend/cpu/simd/math.h), each step rounded where the C++ rounds. The TypeScript
port is src/numerics/mlx-cpu/ (cephes.ts, f32.ts, rounding-points.ts); docs/mlx-cpu-arithmetic.md
has the rules. Every float32 step here is one torch float32 operation (correctly rounded on the CPU
and on CUDA, which torch builds without fast math); the fused multiply-adds are emulated in float64
(an exact product, then a two-sum settles the one case where rounding the double sum to float32
would round twice), because a GPU's own fma is not reachable from torch's element-wise ops."""
from typing import Callable, Dict

import torch


ROUND_TO = ('bf16', 'f32')
# The rule groups and their points, as src/wire/sidecar-format.ts's schema lists them.
ROUNDING_RULES: Dict[str, tuple] = {
    'quantizedMatmul': ('product', 'sum', 'scaled', 'dequantized'),
    'rmsNorm': ('scaled', 'weighted'),
    'rope': ('tables', 'product', 'result'),
    'pooling': ('overlapGate', 'simpleGate', 'weights', 'product', 'sum'),
}


class RoundingError(ValueError):
    pass


def check_rounding(points: dict, where: str) -> dict:
    """The rounding entry exactly as the schema has it (no missing or unknown rule, every value
    bf16 or f32), or a RoundingError naming the first problem."""
    if not isinstance(points, dict):
        raise RoundingError(f'{where}: is {points!r}, not an object of rounding rules')
    known = set(ROUNDING_RULES) | {'backend', 'checked'}
    extra = sorted(set(points) - known)
    if extra:
        raise RoundingError(f'{where}: {extra} are rounding rules this hook does not implement')
    for group, names in ROUNDING_RULES.items():
        g = points.get(group)
        if not isinstance(g, dict) or sorted(g) != sorted(names):
            raise RoundingError(f'{where}.{group}: is {g!r}, expected exactly the points {list(names)}')
        for name in names:
            if g[name] not in ROUND_TO:
                raise RoundingError(f'{where}.{group}.{name}: is {g[name]!r}, expected bf16 or f32')
    if not isinstance(points.get('backend'), str) or not points['backend']:
        raise RoundingError(f'{where}.backend: must name the backend the entry describes')
    return points


def bf16_on_bits(x: torch.Tensor) -> torch.Tensor:
    """float32 -> bf16 value, nearest even, on the bits (bf16-round.ts's rule) for every non-NaN value."""
    u = x.contiguous().view(torch.int32)
    return ((u + ((u >> 16) & 1) + 0x7fff) & -65536).view(torch.float32)


def bf16_by_cast(x: torch.Tensor) -> torch.Tensor:
    """torch's own float32 -> bfloat16 cast and back: one fast kernel on the CPU and on CUDA."""
    return x.to(torch.bfloat16).to(torch.float32)


_BF16_PROBE_BITS = [0x00000001, 0x00008000, 0x00018000, 0x007fffff, 0x00800000, 0x3f808000, 0x3f818000, 0x3f80ffff,
                    0x7f7fffff, 0x7f7f8000, 0x7f800000, 0x80000000, 0x807f8000]
_bf16_rule: Dict[str, Callable[[torch.Tensor], torch.Tensor]] = {}


def bf16_round(x: torch.Tensor) -> torch.Tensor:
    """bf16 rounding (nearest even) as fast as the device allows: torch's cast where it equals the
    rule on this device (probed once per device type on ties, subnormals, the overflow edge and
    random values: a cast that flushed subnormals or rounded otherwise would show), the rule on the
    bits where it does not. Which NaN comes out is left open here: the kv path writes every NaN it
    stores as the canonical 0x7FC00000 (fp32.canonical_nan), as the TypeScript path stores it."""
    kind = x.device.type
    rule = _bf16_rule.get(kind)
    if rule is None:
        g = torch.Generator().manual_seed(42)
        bits = torch.tensor([b - (1 << 32) if b >= 1 << 31 else b for b in _BF16_PROBE_BITS], dtype=torch.int32)
        probe = torch.cat([bits.view(torch.float32), torch.randn(1 << 16, generator=g) * torch.exp(torch.randn(1 << 16, generator=g) * 20)])
        probe = torch.cat([probe, -probe]).to(x.device)
        same = bool((bf16_by_cast(probe).view(torch.int32) == bf16_on_bits(probe).view(torch.int32)).all())
        rule = _bf16_rule[kind] = bf16_by_cast if same else bf16_on_bits
    return rule(x)


def bf16_rule_in_use(device: torch.device) -> str:
    """Which bf16 rounding the device got ('cast' or 'bits'), for records."""
    bf16_round(torch.zeros(1, device=device))
    return 'cast' if _bf16_rule[device.type] is bf16_by_cast else 'bits'


def rounder(to: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """A rule's rounding: bf16 rounds float32 values to bf16 (nearest even); f32 keeps them."""
    if to == 'bf16':
        return bf16_round
    if to == 'f32':
        return lambda t: t
    raise RoundingError(f'rounding {to!r} is not bf16 or f32')


def fma32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """std::fma on float32 operands (broadcast): a*b + c rounded once to float32 (f32.ts's fma32)."""
    p = a.double() * b.double()  # exact: two 24-bit significands fit in 53 bits
    cd = c.double()
    s = p + cd
    r = s.float()
    # Rounding the double sum again can only go wrong when it lies exactly halfway between two
    # float32s (the 29 bits float32 drops are 1000...0) or in float32's subnormal range; nearly
    # never, so the exact settling below runs only when some element needs it.
    dropped = s.view(torch.int64) & 0x1fffffff
    if not bool(((dropped == 0x10000000) | ((s.abs() < 2.0 ** -126) & (s != 0))).any()):
        return r
    bp = s - cd
    e = (p - bp) + (cd - (s - bp))  # s + e is p + c exactly (Knuth's two-sum)
    rd = r.double()
    toward = torch.where(s > rd, torch.full_like(r, float('inf')), torch.full_like(r, float('-inf')))
    n = torch.nextafter(r, toward)
    # s exactly halfway between two float32s: the exact value lies on e's side of it.
    midpoint = (e != 0) & (rd != s) & torch.isfinite(r) & ((s - rd).abs() == (n.double() - s).abs())
    return torch.where(midpoint & ((e > 0) == (n > r)), n, r)


def _c(value: float, like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float32, device=like.device)


def _f32(v: float) -> float:
    return float(torch.tensor(v, dtype=torch.float32))


_LOG2E = _f32(1.442695)
_EXP_P0 = _f32(1.535336188319500e-4)
_EXP_POLY = [_f32(v) for v in (1.339887440266574e-3, 9.618437357674640e-3, 5.550332471162809e-2,
                               2.402264791363012e-1, 6.931472028550421e-1, 1.0)]


def mlx_exp(x: torch.Tensor) -> torch.Tensor:
    """simd::exp on float32 values (what softmax calls): x > 88 gives +inf, x < -88 gives 0."""
    inside = (x >= -88) & (x <= 88)
    safe = torch.where(inside, x, torch.zeros_like(x))
    t = safe * _c(_LOG2E, x)
    # floor(x + 0.5) with a double 0.5: the add and the floor are double operations.
    ipart = torch.floor(t.double() + 0.5)
    fpart = (t.double() - ipart).float()
    p = torch.full_like(x, _EXP_P0)
    for coeff in _EXP_POLY:
        p = fma32(p, fpart, _c(coeff, x))
    # 2^ipart from the exponent bits (ipart = -127 gives the bit pattern 0, i.e. 0.0).
    epart = ((ipart.to(torch.int64) + 127) << 23).to(torch.int32).view(torch.float32)
    y = epart * p
    y = torch.where(x > 88, torch.full_like(x, float('inf')), y)
    y = torch.where(x < -88, torch.zeros_like(x), y)
    return torch.where(torch.isnan(x), x, y)


_FOUR_OVER_PI = _f32(1.27323954473516)
_DP = [_f32(v) for v in (-0.78515625, -2.4187564849853515625e-4, -3.77489497744594108e-8)]
_S = [_f32(v) for v in (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)]
_C = [_f32(v) for v in (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)]
# sincos_checked hands |x| > 2^23 to libm, which is not ported (rope angles stay far below).
CEPHES_LIMIT = 8388608.0


def mlx_sincos(x_in: torch.Tensor):
    """simd::sin and simd::cos of float32 values |x| <= 2^23 (cephes.ts's sincos)."""
    if bool((x_in.abs() > CEPHES_LIMIT).any()):
        raise ValueError("mlx-cpu sin/cos: an angle above 2^23 goes to glibc's sinf/cosf in MLX, not ported")
    c = lambda v: _c(v, x_in)  # noqa: E731
    sign_sin = x_in < 0
    x = x_in.abs()
    y_scaled = x * c(_FOUR_OVER_PI)
    emm2 = (torch.trunc(y_scaled).to(torch.int64) + 1) & ~1
    y = emm2.to(torch.float32)  # exact: below 2^24
    poly_mask = (emm2 & 2) != 0
    for dp in _DP:
        x = fma32(y, c(dp), x)
    sign_sin = sign_sin ^ ((emm2 & 4) != 0)
    sign_cos = ((emm2 - 2) & 4) != 0
    z = x * x
    y1 = fma32(z, c(_S[0]), c(_S[1]))
    y2 = fma32(z, c(_C[0]), c(_C[1]))
    y1 = fma32(y1, z, c(_S[2]))
    y2 = fma32(y2, z, c(_C[2]))
    y1 = y1 * z
    y2 = y2 * z
    y1 = y1 * z
    y2 = fma32(x, y2, x)
    y1 = fma32(z, c(-0.5), y1)
    y1 = y1 + c(1.0)
    ys = torch.where(poly_mask, y1, y2)
    yc = torch.where(poly_mask, y2, y1)
    return torch.where(sign_sin, -ys, ys), torch.where(sign_cos, yc, -yc)

