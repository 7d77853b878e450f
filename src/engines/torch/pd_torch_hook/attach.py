"""Attach a capture session to a transformers DeepSeek-V4 model without patching it: a forward
pre-hook on each `model.model.layers[i].self_attn` sees the post-input_layernorm attention input
(the first positional argument, or the `hidden_states` keyword). Positions are counted here: a
layer's calls are contiguous from 0 (one sequence, batch 1; chunked prefill continues it)."""
import inspect
from typing import List

import torch


class Attached:
    def __init__(self, handles: List):
        self.handles = handles

    def remove(self) -> None:
        """Detach every hook (do it before decoding: decode steps would be fed as prompt rows)."""
        for h in self.handles:
            h.remove()
        self.handles = []


def _layers(model) -> list:
    inner = getattr(model, 'model', model)
    layers = getattr(inner, 'layers', None)
    if layers is None:
        raise TypeError('attach: expected model.model.layers (a transformers DeepSeek-V4 model)')
    return list(layers)


def attach(model, session) -> Attached:
    layers = _layers(model)
    if len(layers) != session.sidecar.num_layers:
        raise ValueError(f'attach: the model has {len(layers)} layers, the sidecar {session.sidecar.num_layers}')
    kwargs_ok = 'with_kwargs' in inspect.signature(torch.nn.Module.register_forward_pre_hook).parameters
    handles = []
    # Rows seen per layer: the true position of the next call (the session's own position stops at
    # a sealed prefix, and rows after it are then ignored by the session).
    seen = [0] * len(layers)
    for i, layer in enumerate(layers):
        def hook(_module, args, kwargs=None, i=i):
            x = args[0] if args else (kwargs or {}).get('hidden_states')
            if x is None or x.dim() != 3 or x.shape[0] != 1:
                raise ValueError(f'capture hook, layer {i}: expected the attention input [1, tokens, hidden], found {None if x is None else list(x.shape)}')
            with torch.no_grad():
                start = seen[i]
                seen[i] += x.shape[1]
                session.on_attention_input(i, start, x[0].detach())
        if kwargs_ok:
            handles.append(layer.self_attn.register_forward_pre_hook(hook, with_kwargs=True))
        else:  # torch < 2.0 (Debian's CPU torch): positional arguments only
            handles.append(layer.self_attn.register_forward_pre_hook(lambda m, a, h=hook: h(m, a)))
    return Attached(handles)
