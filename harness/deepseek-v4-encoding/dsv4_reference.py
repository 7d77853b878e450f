"""Reference renderings of DeepSeek's chat encodings, made with DeepSeek's own Python scripts
(encoding/encoding_dsv4.py beside the V4 weights, encoding/encoding_dsv32.py beside V3.2's; no code
shared with pd-bridge).

  python3 dsv4_reference.py [--encoding v4|v3.2] --reference DIR/encoding_dsv4.py --origin REPO@COMMIT:PATH \
      --cases harness/deepseek-v4-encoding/cases.json --out harness/fixtures/deepseek-v4-encoding.json

Each case is a chat request: messages, tools, chat_template_kwargs. They are handed to
encode_messages the way vLLM's deepseek_v4 / deepseek_v32 tokenizers do: request tools become a
leading system message holding them, `thinking` or `enable_thinking` picks thinking mode,
`drop_thinking` defaults to true (V3.2: and is off when tools are given, as vLLM sets it), and for V4
a reasoning_effort other than "max" or "high" is none (V3.2 has none). Each reply is a completion
text given to parse_message_from_completion_text. A case the script refuses records the error's type.
The output is stamped with the encoding, the script's origin and sha256, and the Python version.
"""
import argparse
import hashlib
import importlib.util
import json
import platform


def load(path):
    spec = importlib.util.spec_from_file_location('encoding_dsv4', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render(enc, case, encoding):
    kwargs = case.get('chat_template_kwargs', {})
    thinking = kwargs.get('thinking', False) or kwargs.get('enable_thinking', False)
    messages = [dict(m) for m in case['messages']]
    tools = case.get('tools')
    if tools:
        messages.insert(0, {'role': 'system', 'tools': tools})
    if encoding == 'v3.2':
        drop = False if tools else kwargs.get('drop_thinking', True)
        return enc.encode_messages(messages, thinking_mode='thinking' if thinking else 'chat', drop_thinking=drop)
    effort = kwargs.get('reasoning_effort')
    if effort not in ('max', 'high'):
        effort = None
    return enc.encode_messages(messages, thinking_mode='thinking' if thinking else 'chat',
                               drop_thinking=kwargs.get('drop_thinking', True), reasoning_effort=effort)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--encoding', choices=['v4', 'v3.2'], default='v4')
    ap.add_argument('--reference', required=True, help='path to encoding_dsv4.py (or encoding_dsv32.py)')
    ap.add_argument('--origin', required=True, help='where that file came from: owner/repo@commit:path')
    ap.add_argument('--cases', required=True)
    ap.add_argument('--out', required=True)
    args = ap.parse_args()
    enc = load(args.reference)
    with open(args.cases, 'rb') as f:
        cases_bytes = f.read()
    with open(args.reference, 'rb') as f:
        reference_sha = hashlib.sha256(f.read()).hexdigest()
    data = json.loads(cases_bytes.decode('utf-8'))
    out = {
        'made_by': 'harness/deepseek-v4-encoding/dsv4_reference.py', 'encoding': args.encoding, 'reference': args.origin,
        'reference_sha256': reference_sha, 'python': platform.python_version(),
        'cases_sha256': hashlib.sha256(cases_bytes).hexdigest(), 'renderings': [], 'replies': [],
    }
    for case in data['cases']:
        try:
            out['renderings'].append({'name': case['name'], 'text': render(enc, case, args.encoding)})
        except Exception as e:  # the reference refuses this conversation: ours must refuse it too
            out['renderings'].append({'name': case['name'], 'error': type(e).__name__})
    for reply in data['replies']:
        try:
            parsed = enc.parse_message_from_completion_text(reply['text'], 'thinking' if reply['thinking'] else 'chat')
            out['replies'].append({'name': reply['name'], 'parsed': parsed})
        except Exception as e:
            out['replies'].append({'name': reply['name'], 'error': type(e).__name__})
    with open(args.out, 'w', encoding='utf-8') as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write('\n')
    print(f"{len(out['renderings'])} renderings, {len(out['replies'])} replies -> {args.out}")


if __name__ == '__main__':
    main()
