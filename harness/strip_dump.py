#!/usr/bin/env python3
"""Keep only the named tensors of a `hf_reference.py dump` file (metadata kept, plus `stripped_from`).

  strip_dump.py IN.safetensors OUT.safetensors NAME [NAME ...]

Used for suites/llama-cpp/fixtures: the parity triangle compares logits and greedy tokens only, so
the caches are left out to keep the committed files small.
"""
import os
import sys

from safetensors import safe_open
from safetensors.torch import save_file


def main():
    src, dst, *names = sys.argv[1:]
    with safe_open(src, framework='pt') as f:
        meta = dict(f.metadata() or {})
        kept = {n: f.get_tensor(n) for n in names}
    meta['stripped_from'] = os.path.basename(src)
    save_file(kept, dst, metadata=meta)
    print(f'wrote {dst}: {len(kept)} of the tensors of {src}')


if __name__ == '__main__':
    main()
