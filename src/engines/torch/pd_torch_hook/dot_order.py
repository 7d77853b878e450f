"""y = x @ W^T in the kernels' accumulation orders (src/kernels/order.ts), emulated with float32
element-wise torch operations so every product and partial sum is rounded where ours is:
  lanes8     8 lanes from +0, lane l adds x[i]*w[i] for i = l, l+8, ... below k - k % 8, in order;
             lanes meet as ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)); the k % 8 leftovers added in order.
  blocks128  each 128-long block (and the last, shorter one) reduced in lanes8, the block sums
             added in order to a sum starting at +0.
A BLAS matmul (torch.matmul) sums in another order and cannot give these bits; this is the price:
k/8 sequential element-wise steps over an [rows, out, 8] tensor."""
import torch

from .fp32 import canonical_nan

LANES = 8
BLOCK = 128
# Rows per step are limited so the [rows, out, 8] lanes tensor stays near this many elements.
MAX_LANE_ELEMENTS = 1 << 24


def _dot_lanes8(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    n, k = x.shape
    out = w.shape[0]
    k8 = k - k % LANES
    lanes = torch.zeros((n, out, LANES), dtype=torch.float32, device=x.device)
    if k8 > 0:
        xs = x[:, :k8].reshape(n, k8 // LANES, LANES)
        ws = w[:, :k8].reshape(out, k8 // LANES, LANES)
        for step in range(k8 // LANES):
            lanes = lanes + xs[:, None, step, :] * ws[None, :, step, :]
    l0, l1, l2, l3, l4, l5, l6, l7 = lanes.unbind(-1)
    s = ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
    for i in range(k8, k):
        s = s + x[:, i, None] * w[None, :, i]
    return s


def _dot_blocks128(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    k = x.shape[1]
    s = torch.zeros((x.shape[0], w.shape[0]), dtype=torch.float32, device=x.device)
    for b0 in range(0, k, BLOCK):
        s = s + _dot_lanes8(x[:, b0:b0 + BLOCK], w[:, b0:b0 + BLOCK])
    return s


def matmul_in_order(x: torch.Tensor, w: torch.Tensor, order: str) -> torch.Tensor:
    """x [n, k] float32, w [out, k] float32 (bf16 weights widened exactly) -> [n, out] float32,
    the dot products in `order` ('lanes8' or 'blocks128'). Rows are independent, so the row
    batching below never changes a bit."""
    if order not in ('lanes8', 'blocks128'):
        raise ValueError(f'matmul order {order!r} is not lanes8 or blocks128')
    dot = _dot_lanes8 if order == 'lanes8' else _dot_blocks128
    n = x.shape[0]
    rows = max(1, MAX_LANE_ELEMENTS // max(1, w.shape[0] * LANES))
    parts = [dot(x[r:r + rows], w) for r in range(0, n, rows)]
    y = parts[0] if len(parts) == 1 else torch.cat(parts, 0)
    return canonical_nan(y)


def rowwise_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """dotInKernelOrder(a[r], b[r]) for every row r of a, b [n, k] -> [n] (RMSNorm's sum of squares)."""
    n, k = a.shape
    k8 = k - k % LANES
    lanes = torch.zeros((n, LANES), dtype=torch.float32, device=a.device)
    for i in range(0, k8, LANES):
        lanes = lanes + a[:, i:i + LANES] * b[:, i:i + LANES]
    l0, l1, l2, l3, l4, l5, l6, l7 = lanes.unbind(-1)
    s = ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
    for i in range(k8, k):
        s = s + a[:, i] * b[:, i]
    return s
