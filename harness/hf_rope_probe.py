#!/usr/bin/env python3
"""Record transformers' DeepSeek-V4 rotary tables, for suites/model/fixtures/hf-rope-probe.json.

Runs where transformers 5.17 is installed (CPU tensors are enough). For four configs it builds
DeepseekV4Config, then DeepseekV4RotaryEmbedding, and records per rope kind (main, compress):
inv_freq bits, attention scaling, and cos/sin bits from forward() at a few positions; plus the
config's to_json_string(). Bits are int32 views of fp32.

  example  the legacy inputs of the save_pretrained example (4 layers, original window 1024)
  flash    V4-Flash (legacy compress_ratios + flat rope_scaling, factor 16)
  f10      V4-Flash with factor 10 (a non-power-of-two factor)
  trap     a hand-written nested rope dict with the traps: no partial_rotary_factor in `main`
           (transformers then builds a full-head table) and no attention_factor in `compress`
"""
import argparse
import json

import torch
import transformers
from transformers import DeepseekV4Config
from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4RotaryEmbedding

POSITIONS = [0, 1, 2, 3, 100, 1000, 2047, 65535, 65536, 131071, 524288, 1048575]
FLASH_RATIOS = [0, 0] + [4, 128] * 20 + [4, 0]


def configs():
    yarn = {'type': 'yarn', 'beta_fast': 32, 'beta_slow': 1}
    return {
        'example': (DeepseekV4Config(vocab_size=512, hidden_size=256, num_hidden_layers=4,
                                     compress_ratios=[0, 4, 128, 4],
                                     rope_scaling={**yarn, 'factor': 16, 'original_max_position_embeddings': 1024}),
                    True),
        'flash': (DeepseekV4Config(vocab_size=129280, hidden_size=4096, num_hidden_layers=43,
                                   compress_ratios=FLASH_RATIOS,
                                   rope_scaling={**yarn, 'factor': 16, 'original_max_position_embeddings': 65536}),
                  True),
        'f10': (DeepseekV4Config(vocab_size=129280, hidden_size=4096, num_hidden_layers=43,
                                 compress_ratios=FLASH_RATIOS,
                                 rope_scaling={**yarn, 'factor': 10, 'original_max_position_embeddings': 65536}),
                True),
        'trap': (DeepseekV4Config(vocab_size=129280, hidden_size=4096, num_hidden_layers=2,
                                  compress_ratios=[0, 4],
                                  rope_parameters={
                                      'main': {'rope_type': 'default', 'rope_theta': 10000},
                                      'compress': {'rope_type': 'yarn', 'rope_theta': 160000, 'factor': 16,
                                                   'original_max_position_embeddings': 65536,
                                                   'partial_rotary_factor': 0.125}}),
                 False),
    }


def bits(t):
    return t.detach().float().contiguous().view(torch.int32).tolist()


def probe(cfg, main_tables):
    """cos/sin are recorded for both kinds, except `main` of the trap config (a full-head table)."""
    rotary = DeepseekV4RotaryEmbedding(cfg)
    out = {'savedJson': json.loads(cfg.to_json_string())}
    for kind in ('main', 'compress'):
        with_tables = main_tables or kind == 'compress'
        entry = {'attentionScaling': float(getattr(rotary, f'{kind}_attention_scaling')),
                 'invFreqBits': bits(getattr(rotary, f'{kind}_inv_freq')),
                 'positions': POSITIONS if with_tables else [], 'cosBits': [], 'sinBits': []}
        if with_tables:
            x = torch.zeros(1, len(POSITIONS), 8)
            cos, sin = rotary(x, torch.tensor([POSITIONS]), layer_type=kind)
            entry['cosBits'], entry['sinBits'] = bits(cos[0]), bits(sin[0])
        out[kind] = entry
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--out', required=True)
    args = p.parse_args()
    result = {'about': f'transformers {transformers.__version__} / torch {torch.__version__}, CPU, '
                       'DeepseekV4RotaryEmbedding; made by harness/hf_rope_probe.py. Bits are int32 views of fp32.',
              'configs': {name: probe(cfg, tables) for name, (cfg, tables) in configs().items()},
              'versions': [transformers.__version__, torch.__version__]}
    with open(args.out, 'w') as f:
        json.dump(result, f)


if __name__ == '__main__':
    main()
