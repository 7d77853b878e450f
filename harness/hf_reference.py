#!/usr/bin/env python3
"""Reference tensors from Hugging Face transformers' DeepSeek-V4, for pd-bridge's checkpoints.

Runs on a CUDA machine with transformers 5.17 (never in CI). Two jobs:

  prove  --model DIR [--tokenizer-cases FILE] --out REPORT.json
      Loads DIR with DeepseekV4ForCausalLM.from_pretrained and records: missing, unexpected and
      mismatched keys (all must be empty), whether transformers' own save_pretrained of the loaded
      model gives back the file's tensor names and values bit for bit (proves its renaming reached
      every module and no initialiser overwrote a tensor), the dtypes transformers kept in a
      bf16 load, the rotary inv_freq buffers, a short greedy run, and the tokenizer's ids for each case
      compared with ours.

  dump   --model DIR --tokens FILE --dtype float32|bfloat16 --split N --greedy K
         [--no-attn-inputs] --out OUT.safetensors
      One-shot prefill and a two-chunk prefill ([0,N) then [N,T)) with per-layer attention inputs
      (a pre-hook on each layer's self_attn), every cache tensor transformers keeps, the last 64
      positions' logits and K greedy tokens, under the names `pd-bridge dump` writes.

TF32 is off so float32 means float32.
"""
import argparse
import hashlib
import json
import os
import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False

import transformers  # noqa: E402
from transformers import DeepseekV4ForCausalLM  # noqa: E402

DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'
DTYPES = {'float32': torch.float32, 'bfloat16': torch.bfloat16}


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def checkpoint_files(model_dir):
    return sorted(f for f in os.listdir(model_dir) if f.endswith('.safetensors'))


def checkpoint_digest(model_dir):
    """sha256 over config.json and the weight files, so fixtures name the exact checkpoint they came from."""
    h = hashlib.sha256()
    for name in ['config.json'] + checkpoint_files(model_dir):
        h.update(name.encode())
        h.update(bytes.fromhex(sha256_of(os.path.join(model_dir, name))))
    return h.hexdigest()


def file_tensors(model_dir):
    out = {}
    for name in checkpoint_files(model_dir):
        with safe_open(os.path.join(model_dir, name), framework='pt') as f:
            for key in f.keys():
                out[key] = f.get_tensor(key)
    return out


def load(model_dir, dtype):
    """Load in fp32, then cast the whole model for bf16.

    transformers 5.17 keeps `_keep_in_fp32_modules_strict` (norms, sinks, hyper-connections) in fp32 on a
    bf16 `from_pretrained`, and its RMSNorm then hands fp32 activations to bf16 linears, which fails
    ("expected mat1 and mat2 to have the same dtype"). A bf16 reference is therefore the fp32 model cast
    with `.to(torch.bfloat16)`: every parameter in bf16, every activation in bf16 except where the
    modeling code itself upcasts (softmaxes, hyper-connections, RoPE)."""
    model, info = DeepseekV4ForCausalLM.from_pretrained(model_dir, dtype=torch.float32, output_loading_info=True)
    if dtype != torch.float32:
        model = model.to(dtype)
    return model.to(DEVICE).eval(), info


def prove(args):
    report = {'transformers': transformers.__version__, 'torch': torch.__version__,
              'checkpoint_sha256': checkpoint_digest(args.model)}
    files = file_tensors(args.model)
    model, info = load(args.model, torch.float32)
    report['loading_info'] = {k: sorted(map(str, v)) for k, v in info.items()}
    report['file_tensor_count'] = len(files)
    report['model_state_count'] = len(model.state_dict())
    resave = resave_comparison(model, args.model, files)
    report.update(resave)
    differ = resave['values_differ_from_file']
    rotary = model.model.rotary_emb
    report['inv_freq'] = {t: [float(x) for x in getattr(rotary, f'{t}_inv_freq').detach().cpu().tolist()]
                          for t in rotary.layer_types}
    report['inv_freq_bits'] = {t: [int(x) for x in getattr(rotary, f'{t}_inv_freq').detach().cpu().float().view(torch.int32).tolist()]
                               for t in rotary.layer_types}
    report['attention_scaling'] = {t: float(getattr(rotary, f'{t}_attention_scaling')) for t in rotary.layer_types}
    ids = torch.arange(2, 40, device=DEVICE).unsqueeze(0)
    with torch.no_grad():
        logits = model(ids).logits
    report['forward_finite'] = bool(torch.isfinite(logits).all())
    report['greedy_f32'] = greedy(model, ids, 8)
    del model
    torch.cuda.empty_cache()
    # A direct bf16 from_pretrained: which tensors transformers keeps in fp32, and whether it runs.
    direct, info16 = DeepseekV4ForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16, output_loading_info=True)
    report['loading_info_bf16'] = {k: sorted(map(str, v)) for k, v in info16.items()}
    report['bf16_load_fp32_tensors'] = sorted(k for k, v in direct.state_dict().items() if v.dtype == torch.float32)
    try:
        with torch.no_grad():
            direct.to(DEVICE)(ids)
        report['bf16_direct_forward'] = 'ok'
    except Exception as err:  # recorded, not fatal: see load()
        report['bf16_direct_forward'] = f'{type(err).__name__}: {err}'
    del direct
    model16, _ = load(args.model, torch.bfloat16)
    report['greedy_bf16_cast'] = greedy(model16, ids, 8)
    report['python_resave_identical'] = python_resave_identical(args.model)
    if args.tokenizer_cases:
        report['tokenizer'] = check_tokenizer(args.model, args.tokenizer_cases)
    ok = (not any(report['loading_info'].values()) and not report['in_file_not_resaved']
          and not report['resaved_not_in_file'] and not differ and report['forward_finite']
          and all(report['python_resave_identical'].values())
          and (not args.tokenizer_cases or report['tokenizer']['mismatches'] == 0))
    report['ok'] = ok
    with open(args.out, 'w') as f:
        json.dump(report, f, indent=1)
    print(json.dumps({k: v for k, v in report.items() if k not in ('inv_freq', 'inv_freq_bits')}, indent=1))
    return 0 if ok else 1


def resave_comparison(model, model_dir, files=None):
    """transformers' own save_pretrained of the loaded model against the files it was loaded from.

    The file may name tensors as transformers' modules or as DeepSeek does (what save_pretrained
    writes): transformers renames on load and back on save, so the same names and values coming
    back proves every file tensor reached the module it belongs to, unchanged."""
    import tempfile
    files = file_tensors(model_dir) if files is None else files
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        saved = file_tensors(tmp)
    as_compared = lambda t: t.float() if t.is_floating_point() else t  # noqa: E731 - fp32 load widens bf16 exactly
    differ = sorted(k for k in files if k in saved and (saved[k].shape != files[k].shape
                    or not torch.equal(as_compared(saved[k].cpu()), as_compared(files[k]))))
    return {'resaved_tensor_count': len(saved), 'in_file_not_resaved': sorted(set(files) - set(saved)),
            'resaved_not_in_file': sorted(set(saved) - set(files)), 'values_differ_from_file': differ}


def python_resave_identical(model_dir):
    """Re-serialise each weight file with Python's safetensors: our writer must give the same bytes."""
    import tempfile
    from safetensors.torch import load_file
    result = {}
    for name in checkpoint_files(model_dir):
        path = os.path.join(model_dir, name)
        with safe_open(path, framework='pt') as f:
            metadata = f.metadata()
        with tempfile.TemporaryDirectory() as tmp:
            again = os.path.join(tmp, name)
            save_file(load_file(path), again, metadata=metadata)
            result[name] = sha256_of(again) == sha256_of(path)
    return result


def check_tokenizer(model_dir, cases_file):
    """Compare the library's ids, decodes and chat renderings with the ones our tokenizer wrote."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_dir)
    with open(cases_file) as f:
        spec = json.load(f)
    failures, checks = [], 0

    def check(what, ours, theirs):
        nonlocal checks
        checks += 1
        if ours != theirs:
            failures.append({'what': what, 'ours': ours, 'hf': theirs})

    for case in spec['cases']:
        check(f"encode {case['text']!r}", case['ids'], tok.encode(case['text'], add_special_tokens=False))
        check(f"encode+special {case['text']!r}", case['idsWithSpecialTokens'], tok.encode(case['text']))
        check(f"decode {case['ids']}", case['decoded'], tok.decode(case['ids'], skip_special_tokens=False))
    for case in spec.get('decodes', []):
        check(f"decode {case['ids']}", case['text'], tok.decode(case['ids'], skip_special_tokens=case['skipSpecialTokens']))
    for case in spec.get('chat', []):
        text = tok.apply_chat_template(case['messages'], tokenize=False, add_generation_prompt=case['addGenerationPrompt'])
        check(f"chat {case['messages']!r}", case['text'], text)
        check(f"chat ids {case['messages']!r}", case['ids'], tok.encode(text, add_special_tokens=False))
    return {'checks': checks, 'mismatches': len(failures), 'failures': failures[:20], 'vocab_size': len(tok)}


@torch.no_grad()
def greedy(model, ids, k):
    out = model(ids, use_cache=True)
    cache = out.past_key_values
    tokens = []
    nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    for _ in range(k):
        tokens.append(int(nxt))
        out = model(nxt, past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    return tokens


def cache_tensors(prefix, cache, store_dtype):
    """The quantities transformers keeps per layer, named as `pd-bridge dump` names them."""
    out = {}
    for i, layer in enumerate(cache.layers):
        base = f'{prefix}.layers.{i}'
        out[f'{base}.window'] = layer.keys[0, 0].to(store_dtype)
        for name in ('compressor', 'indexer'):
            if not hasattr(layer, 'compressed_kv') or name not in layer.compressed_kv:
                continue
            pool = layer.compressed_kv[name]
            if pool is not None:
                out[f'{base}.{name}.compressed_kv'] = pool[0].to(store_dtype)
            out[f'{base}.{name}.entry_count'] = torch.tensor([layer.entry_count[name]], dtype=torch.int64)
            if layer.buffer_kv[name] is not None:
                out[f'{base}.{name}.buffer_kv'] = layer.buffer_kv[name][0].to(store_dtype)
                out[f'{base}.{name}.buffer_gate'] = layer.buffer_gate[name][0].to(store_dtype)
            if hasattr(layer, 'overlap_kv') and layer.overlap_kv.get(name) is not None:
                out[f'{base}.{name}.overlap_kv'] = layer.overlap_kv[name][0].to(store_dtype)
                out[f'{base}.{name}.overlap_gate'] = layer.overlap_gate[name][0].to(store_dtype)
    return out


def read_tokens(path):
    if path.endswith('.json'):
        with open(path) as f:
            return json.load(f)
    with safe_open(path, framework='pt') as f:
        return f.get_tensor('input_ids').flatten().tolist()


@torch.no_grad()
def dump(args):
    dtype = DTYPES[args.dtype]
    store = torch.float32 if dtype == torch.float32 else torch.bfloat16
    model, info = load(args.model, dtype)
    assert not any(info.values()), f'loading info not clean: {info}'
    tokens = read_tokens(args.tokens)
    ids = torch.tensor([tokens], device=DEVICE)
    T = ids.shape[1]
    captured = {}

    def hook_for(i):
        def hook(_module, hargs, hkwargs):
            x = hargs[0] if hargs else hkwargs['hidden_states']
            captured.setdefault(i, []).append(x[0].detach().to(store).cpu())
        return hook

    handles = [layer.self_attn.register_forward_pre_hook(hook_for(i), with_kwargs=True)
               for i, layer in enumerate(model.model.layers)]
    out = {'input_ids': torch.tensor(tokens, dtype=torch.int64)}
    res = model(ids, use_cache=True)
    if not args.no_attn_inputs:
        for i, chunks in captured.items():
            out[f'oneshot.layers.{i}.attn_input'] = torch.cat(chunks, 0)
    captured.clear()
    out.update(cache_tensors('oneshot', res.past_key_values, store))
    out['oneshot.logits_tail'] = res.logits[0, -64:].float().cpu()
    if args.greedy:
        out['greedy'] = torch.tensor(greedy(model, ids, args.greedy), dtype=torch.int64)
    captured.clear()  # greedy decoding above also passed through the hooks
    if args.split:
        first = model(ids[:, :args.split], use_cache=True)
        second = model(ids[:, args.split:], past_key_values=first.past_key_values, use_cache=True)
        if not args.no_attn_inputs:
            for i, chunks in captured.items():
                out[f'chunked.layers.{i}.attn_input'] = torch.cat(chunks, 0)
        out.update(cache_tensors('chunked', second.past_key_values, store))
        out['chunked.logits_last'] = second.logits[0, -1].float().cpu()
    for h in handles:
        h.remove()
    out = {k: v.contiguous().cpu() for k, v in out.items()}
    meta = {'producer': 'harness/hf_reference.py', 'transformers': transformers.__version__,
            'torch': torch.__version__, 'device': torch.cuda.get_device_name() if DEVICE == 'cuda' else 'cpu',
            'dtype': args.dtype, 'tokens': str(T), 'split': str(args.split or ''),
            'checkpoint_sha256': checkpoint_digest(args.model), 'tf32': 'off'}
    save_file(out, args.out, metadata=meta)
    print(f'wrote {args.out}: {len(out)} tensors, T={T}, dtype={args.dtype}')
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest='cmd', required=True)
    pp = sub.add_parser('prove')
    pp.add_argument('--model', required=True)
    pp.add_argument('--tokenizer-cases')
    pp.add_argument('--out', required=True)
    pd = sub.add_parser('dump')
    pd.add_argument('--model', required=True)
    pd.add_argument('--tokens', required=True)
    pd.add_argument('--dtype', choices=sorted(DTYPES), default='float32')
    pd.add_argument('--split', type=int, default=0)
    pd.add_argument('--greedy', type=int, default=12)
    pd.add_argument('--no-attn-inputs', action='store_true')
    pd.add_argument('--out', required=True)
    args = p.parse_args()
    return prove(args) if args.cmd == 'prove' else dump(args)


if __name__ == '__main__':
    sys.exit(main())
