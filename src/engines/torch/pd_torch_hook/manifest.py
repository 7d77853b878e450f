"""The capture manifest (src/wire/manifest.ts, format pd-bridge-capture/1): the same keys in the
same order, rewritten only by atomic rename, so the share, the block writer and the front door
read it as they read the TypeScript hook's."""
import datetime
import hashlib
import json
import os
import re
import struct
from typing import List, Optional

from .layer_file import write_file_atomic

CAPTURE_FORMAT = 'pd-bridge-capture/1'
MANIFEST_FILE = 'manifest.json'
REQUEST_ID = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$')
KEY_ORDER = ['format', 'requestId', 'state', 'tokenCount', 'tokensSha256', 'sealedLength', 'sidecarFingerprint',
             'profile', 'numLayers', 'layers', 'error', 'createdAt', 'updatedAt', 'timings', 'payloadBytes',
             'memoryBudgetBytes']


def now_iso() -> str:
    """new Date().toISOString(): UTC, milliseconds, Z."""
    t = datetime.datetime.now(datetime.timezone.utc)
    return t.strftime('%Y-%m-%dT%H:%M:%S.') + f'{t.microsecond // 1000:03d}Z'


def layer_file_name(index: int) -> str:
    if not 0 <= index < 1000:
        raise ValueError(f'layer index {index} is not an integer in 0..999')
    return f'layer-{index:03d}.safetensors'


def token_ids_sha256(ids) -> str:
    """tokenIdsSha256: SHA-256 of the ids as little-endian uint32."""
    ids = [int(t) for t in ids]
    for i, t in enumerate(ids):
        if not 0 <= t <= 0xffffffff:
            raise ValueError(f'token digest: token {i} is {t}, not an integer id in [0, 2^32)')
    return hashlib.sha256(struct.pack(f'<{len(ids)}I', *ids)).hexdigest()


def check_request_id(request_id: str) -> None:
    if not REQUEST_ID.match(request_id) or '..' in request_id:
        raise ValueError(f'request id {request_id!r} must match {REQUEST_ID.pattern} without ".."')


def encode(m: dict) -> bytes:
    ordered = {k: m[k] for k in KEY_ORDER if m.get(k) is not None}
    return (json.dumps(ordered, indent=2) + '\n').encode()


def write(directory: str, m: dict) -> None:
    write_file_atomic(os.path.join(directory, MANIFEST_FILE), encode(m))


def read(directory: str) -> dict:
    with open(os.path.join(directory, MANIFEST_FILE), encoding='utf-8') as f:
        return json.load(f)


def start(root: str, request_id: str, token_count: int, fingerprint: str, profile: str, num_layers: int,
          memory_budget_bytes: Optional[int], tokens_sha256: Optional[str]) -> dict:
    """Create <root>/<requestId>/ (refusing one that exists) and its running manifest."""
    check_request_id(request_id)
    directory = os.path.join(root, request_id)
    stamp = now_iso()
    m = {'format': CAPTURE_FORMAT, 'requestId': request_id, 'state': 'running', 'tokenCount': token_count,
         'tokensSha256': tokens_sha256, 'sealedLength': 0, 'sidecarFingerprint': fingerprint, 'profile': profile,
         'numLayers': num_layers, 'layers': [], 'createdAt': stamp, 'updatedAt': stamp, 'timings': {},
         'payloadBytes': 0, 'memoryBudgetBytes': memory_budget_bytes}
    if not os.path.isdir(root):
        raise FileNotFoundError(f'capture root {root} does not exist')
    os.mkdir(directory)
    write(directory, m)
    return m


def later_stamp(previous: str) -> str:
    now = now_iso()
    return now if now >= previous else previous


def list_layers(directory: str, m: dict, entries: List[dict]) -> dict:
    """The manifest with `entries` (index, file, bytes, sha256) listed; written atomically."""
    if m['state'] != 'running':
        raise ValueError(f'manifest state is {m["state"]}; the session cannot list more layers')
    layers = sorted(m['layers'] + entries, key=lambda e: e['index'])
    m = dict(m, layers=layers, payloadBytes=m['payloadBytes'] + sum(e['bytes'] for e in entries), updatedAt=later_stamp(m['updatedAt']))
    write(directory, m)
    return m


def finish(directory: str, m: dict, state: str, sealed_length: Optional[int] = None, error: Optional[str] = None,
           timings: Optional[dict] = None) -> dict:
    if m['state'] != 'running':
        raise ValueError(f'manifest state is already {m["state"]}; cannot seal it again as {state}')
    sealed = m['sealedLength']
    if state == 'done':
        sealed = m['tokenCount'] if sealed_length is None else sealed_length
    elif state == 'partial':
        sealed = sealed_length
    elif state == 'failed' and not error:
        raise ValueError('a failed capture must record its error')
    m = dict(m, state=state, sealedLength=sealed, error=error if state == 'failed' else None,
             timings={**m['timings'], **(timings or {})}, updatedAt=later_stamp(m['updatedAt']))
    write(directory, m)
    return m
