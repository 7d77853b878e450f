#!/usr/bin/env python3
"""Checkpoints written by transformers' own save_pretrained, for pd-bridge's loader (issue 13).

Runs on a CUDA machine with transformers 5.17 (never in CI). Two jobs:

  names --config DIR --out NAMES.json [--source-out SOURCE.txt]
      Builds DeepseekV4ForCausalLM from DIR/config.json (a pd-bridge preset's), gives every parameter
      and buffer distinct values, saves it with save_pretrained and records what the saved files hold:
      each tensor's name, shape and dtype, and which in-memory tensor (and which slice of it) it
      equals, so the renaming table is read off transformers itself. With --source-out, the parts of
      transformers' source that define the renaming (its conversion mapping for deepseek_v4).

  make --out DIR --seed N
      A checkpoint made entirely by transformers: a small DeepSeek-V4 config with every layer kind
      (sliding, CSA, HCA; hash and top-k MoE) and YaRN on the compress rope with a short original
      window, every parameter and buffer non-trivial (sinks, position biases, hyper-connection base
      and scale, correction biases, hash routes), weights stored in bfloat16 and transformers'
      keep-in-fp32 modules in float32, written by save_pretrained exactly as it writes.
"""
import argparse
import inspect
import json
import os
import re
import sys
import tempfile

import torch
from safetensors import safe_open

import transformers
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM


def fill_non_trivial(model, seed):
    """Scaled normal weights, norms near 1, biases and sinks clearly non-zero, random hash routes."""
    g = torch.Generator().manual_seed(seed)
    experts = model.config.n_routed_experts
    with torch.no_grad():
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            leaf = name.split('.')[-1]
            if 'inv_freq' in name:
                continue
            if leaf == 'tid2eid':
                rows = [torch.randperm(experts, generator=g)[: p.shape[1]] for _ in range(p.shape[0])]
                p.copy_(torch.stack(rows).to(p.dtype))
                continue
            shape = p.shape
            noise = torch.randn(shape, generator=g, dtype=torch.float32)
            if leaf in ('scale', 'hc_scale'):
                value = 1 + 0.1 * noise
            elif 'norm' in name and leaf == 'weight':
                value = 1 + 0.05 * noise
            elif leaf in ('sinks',):
                value = noise
            elif leaf in ('position_bias',):
                value = 0.5 * noise
            elif leaf in ('base', 'hc_base'):
                value = 0.5 * noise
            elif leaf == 'e_score_correction_bias':
                value = 0.1 * noise
            elif 'embed_tokens' in name:
                value = noise
            else:
                value = noise / (shape[-1] ** 0.5)
            p.copy_(value.to(p.dtype))


def keep_fp32(model, name):
    keep = set(getattr(model, '_keep_in_fp32_modules_strict', None) or []) | set(getattr(model, '_keep_in_fp32_modules', None) or [])
    return any(part in keep for part in name.split('.'))


def store_like_hub(model):
    """bf16 weights, fp32 where transformers keeps fp32 (what a bf16 release looks like)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not keep_fp32(model, name):
                p.data = p.data.to(torch.bfloat16)


def saved_tensors(out_dir):
    files = sorted(f for f in os.listdir(out_dir) if f.endswith('.safetensors'))
    tensors = {}
    for f in files:
        with safe_open(os.path.join(out_dir, f), framework='pt') as h:
            for k in h.keys():
                tensors[k] = (f, h.get_tensor(k))
    return files, tensors


def relation(saved, state):
    """Which in-memory tensor `saved` equals: whole, one expert's slab, or a half of one."""
    s = saved.float() if saved.is_floating_point() else saved
    for name, m in state.items():
        mm = m.float() if m.is_floating_point() else m
        if mm.shape == s.shape and torch.equal(mm, s):
            return {'from': name, 'how': 'identical'}
    for name, m in state.items():
        if m.dim() != 3 or m.shape[-1] != s.shape[-1]:
            continue
        mm = m.float() if m.is_floating_point() else m
        for e in range(m.shape[0]):
            if mm[e].shape == s.shape and torch.equal(mm[e], s):
                return {'from': name, 'how': f'[{e}]'}
            half = m.shape[1] // 2
            if mm[e, :half].shape == s.shape and torch.equal(mm[e, :half], s):
                return {'from': name, 'how': f'[{e}, :{half}]'}
            if mm[e, half:].shape == s.shape and torch.equal(mm[e, half:], s):
                return {'from': name, 'how': f'[{e}, {half}:]'}
    return {'from': None, 'how': 'no in-memory tensor equals it'}


def names(args):
    cfg = DeepseekV4Config.from_pretrained(args.config)
    torch.manual_seed(0)
    model = DeepseekV4ForCausalLM(cfg).eval()
    fill_non_trivial(model, 1)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        files, tensors = saved_tensors(tmp)
        with open(os.path.join(tmp, 'config.json')) as f:
            saved_config = json.load(f)
    entries = []
    for k, (f, t) in tensors.items():
        entries.append({'name': k, 'shape': list(t.shape), 'dtype': str(t.dtype).replace('torch.', ''),
                        'file': f, **relation(t, state)})
    report = {
        'producer': 'harness/hf_saved_checkpoint.py names',
        'transformers': transformers.__version__, 'torch': torch.__version__,
        'config_from': os.path.basename(os.path.normpath(args.config)),
        'files': files,
        'in_memory': [{'name': k, 'shape': list(v.shape), 'dtype': str(v.dtype).replace('torch.', '')} for k, v in state.items()],
        'saved': entries,
        'saved_config': saved_config,
    }
    with open(args.out, 'w') as f:
        json.dump(report, f, indent=1)
    unmatched = [e['name'] for e in entries if e['from'] is None]
    print(f'saved {len(entries)} tensors in {files}; in memory {len(state)}; unmatched {len(unmatched)}: {unmatched[:5]}')
    if args.source_out:
        with open(args.source_out, 'w') as f:
            f.write(conversion_source())
    return 0


def conversion_source():
    """The source text that defines transformers' renaming for deepseek_v4, for the docs' derivation."""
    parts = []
    try:
        from transformers import conversion_mapping as cm
        src = inspect.getsource(cm)
        parts.append(f'# transformers/conversion_mapping.py ({len(src)} chars); lines mentioning deepseek with context\n')
        lines = src.splitlines()
        for i, line in enumerate(lines):
            if 'deepseek_v4' in line or 'DeepseekV4' in line:
                lo, hi = max(0, i - 5), min(len(lines), i + 120)
                parts.append(f'--- lines {lo + 1}-{hi}\n' + '\n'.join(lines[lo:hi]) + '\n')
        for fn in ('get_checkpoint_conversion_mapping', 'get_model_conversion_mapping'):
            if hasattr(cm, fn):
                try:
                    parts.append(f'--- {fn}("deepseek_v4") =\n{getattr(cm, fn)("deepseek_v4")!r}\n')
                except Exception as err:  # noqa: BLE001 - recorded
                    parts.append(f'--- {fn} raised {err!r}\n')
    except Exception as err:  # noqa: BLE001 - recorded
        parts.append(f'conversion_mapping not importable: {err!r}\n')
    pkg = os.path.dirname(transformers.__file__)
    model_dir = os.path.join(pkg, 'models', 'deepseek_v4')
    for fname in sorted(os.listdir(model_dir)):
        if not fname.endswith('.py'):
            continue
        with open(os.path.join(model_dir, fname)) as f:
            lines = f.read().splitlines()
        for i, line in enumerate(lines):
            if re.search(r'conversion|key_mapping|rename|scale_inv|_checkpoint|WeightConverter|WeightRenaming', line):
                lo, hi = max(0, i - 3), min(len(lines), i + 40)
                parts.append(f'--- models/deepseek_v4/{fname} lines {lo + 1}-{hi}\n' + '\n'.join(lines[lo:hi]) + '\n')
    for rel in ('integrations/finegrained_fp8.py', 'quantizers/quantizer_finegrained_fp8.py'):
        path = os.path.join(pkg, rel)
        if os.path.exists(path):
            with open(path) as f:
                lines = f.read().splitlines()
            hits = [i for i, line in enumerate(lines) if 'scale_inv' in line or "'scale'" in line or '"scale"' in line or 'block_size' in line]
            parts.append(f'--- {rel}: {len(lines)} lines, scale mentions at {hits[:40]}\n')
            for i in hits[:12]:
                parts.append(f'{rel}:{i + 1}: {lines[i]}\n')
    return ''.join(parts)


def small_config():
    """Every layer kind at small widths; compress-rope YaRN factor 4 over an original window of 512."""
    return DeepseekV4Config(
        vocab_size=512, hidden_size=128, num_hidden_layers=5,
        layer_types=['sliding_attention', 'compressed_sparse_attention', 'heavily_compressed_attention',
                     'compressed_sparse_attention', 'heavily_compressed_attention'],
        mlp_layer_types=['hash_moe', 'moe', 'moe', 'moe', 'moe'],
        compress_rates={'compressed_sparse_attention': 4, 'heavily_compressed_attention': 128},
        num_attention_heads=2, num_key_value_heads=1, head_dim=128, partial_rotary_factor=0.5,
        q_lora_rank=64, o_groups=2, o_lora_rank=32,
        index_n_heads=2, index_head_dim=128, index_topk=6,
        n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=64,
        sliding_window=128, hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6,
        scoring_func='sqrtsoftplus', norm_topk_prob=True, routed_scaling_factor=1.5, swiglu_limit=10.0,
        max_position_embeddings=4096, num_nextn_predict_layers=0, tie_word_embeddings=False,
        rms_norm_eps=1e-6, bos_token_id=0, eos_token_id=1,
        rope_parameters={
            'main': {'rope_type': 'default', 'rope_theta': 10000.0, 'partial_rotary_factor': 0.5},
            'compress': {'rope_type': 'yarn', 'rope_theta': 160000.0, 'factor': 4.0,
                         'original_max_position_embeddings': 512, 'beta_fast': 32.0, 'beta_slow': 1.0,
                         'attention_factor': 1.0, 'partial_rotary_factor': 0.5},
        },
    )


def make(args):
    torch.manual_seed(args.seed)
    model = DeepseekV4ForCausalLM(small_config()).eval()
    fill_non_trivial(model, args.seed)
    store_like_hub(model)
    model.save_pretrained(args.out)
    files, tensors = saved_tensors(args.out)
    print(f'saved {len(tensors)} tensors in {files} to {args.out}')
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest='cmd', required=True)
    pn = sub.add_parser('names')
    pn.add_argument('--config', required=True)
    pn.add_argument('--out', required=True)
    pn.add_argument('--source-out')
    pm = sub.add_parser('make')
    pm.add_argument('--out', required=True)
    pm.add_argument('--seed', type=int, default=1)
    args = p.parse_args()
    return names(args) if args.cmd == 'names' else make(args)


if __name__ == '__main__':
    sys.exit(main())
