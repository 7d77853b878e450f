"""The kv path's element-wise steps with the decoder profile's rounding points
(src/model/engine/{activation,norms}.ts, src/kernels/{reference,pool}.ts)."""
import torch

from .dot_order import rowwise_dot
from .fp32 import canonical_nan, const, exp_f32, round_bf16


class Activations:
    """A profile's activation rounding: bf16 (RNE on the bits) or none (f32)."""

    def __init__(self, kind: str):
        if kind not in ('bf16', 'f32'):
            raise ValueError(f'activations {kind!r} is not bf16 or f32')
        self.bf16 = kind == 'bf16'

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return round_bf16(x) if self.bf16 else x


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """reference.rmsNorm per row: ss in the kernel order, mean = ss / d, r = 1 / sqrt(mean + eps), (x * r) * w."""
    d = x.shape[1]
    ss = rowwise_dot(x, x)
    mean = ss / const(float(d), x)
    inv = const(1.0, x) / torch.sqrt(mean + const(eps, x))
    return canonical_nan((x * inv[:, None]) * weight[None, :])


def weighted_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, act: Activations) -> torch.Tensor:
    """DeepseekV4RMSNorm with transformers' rounding points: f32 (x r) w; bf16 act(w * act(x r))."""
    if not act.bf16:
        return rms_norm(x, weight, eps)
    y = act(rms_norm(x, torch.ones_like(weight), eps))
    return act(weight[None, :] * y)


def softmax_pool(kv: torch.Tensor, gate: torch.Tensor, bf16: bool) -> torch.Tensor:
    """reference.softmaxPool over slots: kv, gate [W, slots, d] -> [W, d]. Per channel: the running
    max in slot order, e = exp(g - m), the sum in slot order, p = e / sum, then sum_s p kv in slot
    order; with bf16 the weights, the products and the result are rounded to bf16."""
    slots = gate.shape[1]
    m = gate[:, 0]
    for r in range(1, slots):
        g = gate[:, r]
        m = torch.where(g > m, g, m)
    e = exp_f32(gate - m[:, None])
    total = torch.zeros_like(m)
    for r in range(slots):
        total = total + e[:, r]
    p = e / total[:, None]
    if bf16:
        p = round_bf16(p)
    prod = p * kv
    if bf16:
        prod = round_bf16(prod)
    acc = torch.zeros_like(m)
    for r in range(slots):
        acc = acc + prod[:, r]
    acc = canonical_nan(acc)
    return round_bf16(acc) if bf16 else acc
