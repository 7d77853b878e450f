"""Request bodies of POST /v1/prefill (src/engines/prefill/request.ts): exactly one of tokens,
prompt or messages; request_id, memory_budget_bytes and tokens_sha256 optional (the digest of the
token ids the front door means: checked against the ids this engine would prefill); stream_blocks
optional (publish block segments after every chunk: runner.py); unknown fields
refused."""
import re
import uuid
from typing import List, NamedTuple, Optional

from pd_torch_hook.manifest import token_ids_sha256

from .api_error import bad_request

FIELDS = {'request_id', 'tokens', 'prompt', 'messages', 'memory_budget_bytes', 'tokens_sha256', 'stream_blocks'}
HEX64 = re.compile(r'^[0-9a-f]{64}$')
ROLES = {'system', 'user', 'assistant'}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class Parsed(NamedTuple):
    request_id: str
    tokens: List[int]
    budget: Optional[int]
    tokens_sha256: str
    stream_blocks: bool


def parse(body, vocab: int, max_tokens: int, max_pos: int, tokenizer, check_id) -> Parsed:
    if not isinstance(body, dict):
        raise bad_request('the body must be a JSON object')
    for k in body:
        if k not in FIELDS:
            raise bad_request(f'unknown field {k!r}', k)
    given = [k for k in ('tokens', 'prompt', 'messages') if k in body]
    if len(given) != 1:
        raise bad_request(f'give exactly one of tokens, prompt, messages (got {", ".join(given) or "none"})')
    rid = body.get('request_id', f'prefill-{uuid.uuid4()}')
    if not isinstance(rid, str):
        raise bad_request('request_id must be a string', 'request_id')
    check_id(rid)
    budget = body.get('memory_budget_bytes')
    if budget is not None and (not _is_int(budget) or budget < 1):
        raise bad_request('memory_budget_bytes must be a positive integer', 'memory_budget_bytes')
    stream = body.get('stream_blocks', False)
    if not isinstance(stream, bool):
        raise bad_request(f'stream_blocks must be true or false, got {stream!r}', 'stream_blocks')
    if 'tokens' in body:
        ids = body['tokens']
        if not isinstance(ids, list) or not ids:
            raise bad_request('tokens must be a non-empty array of token ids', 'tokens')
        for i, t in enumerate(ids):
            if not _is_int(t) or not 0 <= t < vocab:
                raise bad_request(f'tokens[{i}] is {t!r}, not a token id in [0, {vocab})', f'tokens[{i}]')
    else:
        if tokenizer is None:
            raise bad_request('this engine has no tokenizer; send tokens', given[0])
        if 'prompt' in body:
            if not isinstance(body['prompt'], str) or not body['prompt']:
                raise bad_request('prompt must be a non-empty string', 'prompt')
            ids = tokenizer.encode(body['prompt'], add_special_tokens=True)
        else:
            msgs = body['messages']
            if not isinstance(msgs, list) or not msgs:
                raise bad_request('messages must be a non-empty array', 'messages')
            for i, m in enumerate(msgs):
                if not isinstance(m, dict) or m.get('role') not in ROLES or not isinstance(m.get('content'), str):
                    raise bad_request(f'messages[{i}] must be {{role: system|user|assistant, content: string}}', f'messages[{i}].role')
            ids = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
    if len(ids) > max_pos:
        raise bad_request(f"{len(ids)} tokens exceed the model's max_position_embeddings ({max_pos})", given[0])
    if len(ids) > max_tokens:
        raise bad_request(f'{len(ids)} tokens exceed --max-tokens ({max_tokens})', given[0])
    ids = [int(t) for t in ids]
    digest = token_ids_sha256(ids)
    claimed = body.get('tokens_sha256')
    if claimed is not None:
        if not isinstance(claimed, str) or not HEX64.match(claimed):
            raise bad_request(f'tokens_sha256 must be 64 lowercase hex digits (SHA-256 of the token ids as little-endian uint32), got {claimed!r}', 'tokens_sha256')
        if claimed != digest:
            raise bad_request(f'tokens_sha256 is {claimed}, but the {len(ids)} token ids this engine would prefill (from {given[0]}) hash to {digest}', 'tokens_sha256')
    return Parsed(rid, ids, budget, digest, stream)
