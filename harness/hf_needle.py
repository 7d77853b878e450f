#!/usr/bin/env python3
"""Needle retrieval by transformers' own DeepSeek-V4 forward, for the `needle` preset.

Runs on a CUDA machine with transformers 5.17 (never in CI):

  hf_needle.py --model DIR --cases CASES.json --out PROOF.json [--chunk N] [--dtypes float32,bfloat16]

DIR is `pd-bridge make-checkpoint --preset needle --seed 1 --out DIR`; CASES.json is
`npx tsx harness/make-needle-cases.ts CASES.json`. For each case: the tokenizer's ids for the case's
text (must equal ours), and in float32 and in bfloat16 (the fp32 model cast, see hf_reference.load)
the greedy continuation of two tokens, which must be the expected value (or " unknown") then EOS,
with the margin of the answer's logit over the runner-up at the question. Also the loading report
(no missing/unexpected/mismatched keys; transformers' save_pretrained of the loaded model gives back
the file's names and values). TF32 is off.
"""
import argparse
import gzip
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_reference import DEVICE, checkpoint_digest, load, resave_comparison  # noqa: E402

import transformers  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402


@torch.no_grad()
def answer(model, ids, steps, chunk=0):
    """Greedy `steps` tokens after `ids`. chunk > 0 prefills `chunk` tokens per forward through the
    model's own cache (eager attention's score matrix is quadratic: one-shot runs out of GPU memory
    at 64K tokens on the needle-long architecture)."""
    if chunk <= 0:
        chunk = len(ids)
    cache = None
    for start in range(0, len(ids), chunk):
        x = torch.tensor([ids[start:start + chunk]], device=DEVICE)
        out = model(x, past_key_values=cache, use_cache=True)
        cache = out.past_key_values
    logits = out.logits[0, -1].float()
    top = torch.topk(logits, 2)
    tokens = []
    nxt = logits.argmax().view(1, 1)
    for _ in range(steps):
        tokens.append(int(nxt))
        out = model(nxt, past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    return tokens, float(top.values[0] - top.values[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--model', required=True)
    ap.add_argument('--cases', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--chunk', type=int, default=0, help='prefill this many tokens per forward (0: one shot)')
    ap.add_argument('--dtypes', default='float32,bfloat16', help='comma-separated: float32, bfloat16')
    args = ap.parse_args()
    # A case file may travel gzipped (a million-token document is 14 MB as JSON).
    with (gzip.open(args.cases, 'rt') if args.cases.endswith('.gz') else open(args.cases)) as f:
        cases = json.load(f)['cases']
    tok = AutoTokenizer.from_pretrained(args.model)
    eos = tok.eos_token_id
    unknown = tok.convert_tokens_to_ids(' unknown')
    report = {'transformers': transformers.__version__, 'torch': torch.__version__, 'device': torch.cuda.get_device_name(0) if DEVICE == 'cuda' else 'cpu',
              'checkpoint_sha256': checkpoint_digest(args.model), 'tf32': 'off', 'chunk': args.chunk, 'cases': []}
    models = {}
    for dtype in [getattr(torch, d) for d in args.dtypes.split(',')]:
        model, info = load(args.model, dtype)
        models[str(dtype).replace('torch.', '')] = model
        if dtype == torch.float32:
            report['loading_info'] = {k: sorted(map(str, v)) for k, v in info.items()}
            resave = resave_comparison(model, args.model)
            report['values_differing_from_file'] = resave['values_differ_from_file']
            report['resave_names_equal'] = not resave['in_file_not_resaved'] and not resave['resaved_not_in_file']
    for c in cases:
        hf_ids = tok.encode(c['text'], add_special_tokens=False)
        asked = [n for n in c['needles'] if n['key'] == c['ask']]
        # The asked needle's value token as it sits in the document (our ids), or " unknown".
        expected_token = c['ids'][asked[0]['position']] if asked else unknown
        row = {'name': c['name'], 'digest': c['digest'], 'tokens': len(c['ids']), 'tokenizer_ids_equal': hf_ids == c['ids'],
               'expected': [expected_token, eos], 'needle_positions': [n['position'] for n in c['needles']]}
        for name, model in models.items():
            tokens, margin = answer(model, c['ids'], 2, args.chunk)
            row[name] = {'greedy': tokens, 'text': tok.decode(tokens), 'margin': round(margin, 4), 'pass': tokens == [expected_token, eos]}
        report['cases'].append(row)
        print(row['name'], row['tokens'], {k: (row[k]['text'], row[k]['margin'], row[k]['pass']) for k in models}, 'tokenizer', row['tokenizer_ids_equal'], flush=True)
    report['all_pass'] = all(r[k]['pass'] and r['tokenizer_ids_equal'] for r in report['cases'] for k in models)
    with open(args.out, 'w') as f:
        json.dump(report, f, indent=1)
        f.write('\n')
    print('all pass' if report['all_pass'] else 'NOT all pass')


if __name__ == '__main__':
    main()
