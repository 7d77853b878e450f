"""Reference fixtures for tokenizer and chat-template parity, made with the Rust `tokenizers`
library and transformers' apply_chat_template (no code shared with pd-bridge).

  python3 hf_parity.py --inputs harness/tokenizer-parity/inputs --out OUTDIR

For each tokenizer directory under --inputs (tokenizer.json + tokenizer_config.json) writes
OUTDIR/<name>.json: for every corpus text, the Rust library's ids without and with special tokens
and the decodes of those ids; for every chat case, apply_chat_template's text and the ids of that
text. Texts holding lone surrogates (which Python strings can hold and the Rust library refuses)
are given to the library with each lone surrogate replaced by U+FFFD, the replacement WHATWG's
UTF-8 encoder (and so pd-bridge) makes; the fixture says which texts those were.
"""
import argparse
import hashlib
import json
import os
import platform
import re
import sys

LONE = re.compile('[\ud800-\udfff]')


def well_formed(text):
    return LONE.sub('\ufffd', text)


def sha256(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--inputs', required=True)
    ap.add_argument('--out', required=True)
    args = ap.parse_args()
    import tokenizers
    import transformers
    import jinja2
    from transformers import AutoTokenizer

    corpus_path = os.path.join(args.inputs, 'corpus.json')
    chats_path = os.path.join(args.inputs, 'chats.json')
    texts = json.load(open(corpus_path, encoding='utf-8'))['texts']
    cases = json.load(open(chats_path, encoding='utf-8'))['cases']
    stamp = {
        'transformers': transformers.__version__, 'tokenizers': tokenizers.__version__, 'jinja2': jinja2.__version__,
        'python': platform.python_version(), 'made_by': 'harness/tokenizer-parity/hf_parity.py',
        'corpus_sha256': sha256(corpus_path), 'chats_sha256': sha256(chats_path),
    }
    os.makedirs(args.out, exist_ok=True)
    summary = {}
    for name in sorted(os.listdir(args.inputs)):
        d = os.path.join(args.inputs, name)
        if not os.path.isdir(d):
            continue
        rust = tokenizers.Tokenizer.from_file(os.path.join(d, 'tokenizer.json'))
        try:
            auto = AutoTokenizer.from_pretrained(d)
        except Exception as e:  # fall back to the fast class itself, and say so
            print(f'{name}: AutoTokenizer failed ({type(e).__name__}: {e}); using PreTrainedTokenizerFast', file=sys.stderr)
            cfg = json.load(open(os.path.join(d, 'tokenizer_config.json'), encoding='utf-8'))
            auto = transformers.PreTrainedTokenizerFast(
                tokenizer_file=os.path.join(d, 'tokenizer.json'), chat_template=cfg.get('chat_template'),
                bos_token=cfg.get('bos_token'), eos_token=cfg.get('eos_token'), pad_token=cfg.get('pad_token'))
        out = dict(stamp, tokenizer=name, tokenizer_json_sha256=sha256(os.path.join(d, 'tokenizer.json')),
                   tokenizer_config_sha256=sha256(os.path.join(d, 'tokenizer_config.json')),
                   auto_class=type(auto).__name__, texts=[], chats=[])
        auto_differs = 0
        for text in texts:
            given = well_formed(text)
            ids = rust.encode(given, add_special_tokens=False).ids
            with_special = rust.encode(given, add_special_tokens=True).ids
            try:
                if auto(given, add_special_tokens=True)['input_ids'] != with_special:
                    auto_differs += 1
            except Exception:
                auto_differs += 1
            out['texts'].append({
                'text': text, 'replaced_surrogates': given != text, 'ids': ids, 'ids_with_special_tokens': with_special,
                'decoded': rust.decode(ids, skip_special_tokens=False),
                'decoded_skip_special': rust.decode(with_special, skip_special_tokens=True),
            })
        for case in cases:
            kwargs = dict(case.get('kwargs') or {})
            try:
                rendered = auto.apply_chat_template(case['messages'], tools=case.get('tools'), tokenize=False,
                                                    add_generation_prompt=case['addGenerationPrompt'], **kwargs)
                entry = {'name': case['name'], 'text': rendered, 'ids': rust.encode(well_formed(rendered), add_special_tokens=False).ids}
            except Exception as e:  # a template that raises is a result too
                entry = {'name': case['name'], 'error': f'{type(e).__name__}: {e}'}
            out['chats'].append(entry)
        out['auto_tokenizer_differs_from_rust'] = auto_differs
        with open(os.path.join(args.out, f'{name}.json'), 'w', encoding='utf-8') as f:
            json.dump(out, f, ensure_ascii=True, indent=None, separators=(',', ':'))
            f.write('\n')
        summary[name] = {'texts': len(out['texts']), 'chats': len(out['chats']), 'auto_differs': auto_differs,
                         'chat_errors': sum(1 for c in out['chats'] if 'error' in c)}
    print(json.dumps({'stamp': stamp, 'summary': summary}, indent=1))


if __name__ == '__main__':
    sys.exit(main())
