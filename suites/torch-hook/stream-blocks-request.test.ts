// The torch prefill server's `stream_blocks` (src/engines/torch/prefill_server/request.py), as the
// TypeScript engine's request.ts takes it: true or false, absent meaning false, anything else a 400
// naming the field before any work. Its /health says `stream_blocks: true` (app.py; aiohttp is not
// installed here, so that route runs on the GPU machine only).
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'
import { torchAvailability, TORCH_PYTHON } from './python.ts'

const TORCH_DIR = fileURLToPath(new URL('../../src/engines/torch', import.meta.url))
const torch = torchAvailability()

const SCRIPT = `
import json, sys
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
from prefill_server.request import parse
from prefill_server.api_error import ApiError

def case(extra):
    try:
        p = parse({'tokens': [1, 2, 3], **extra}, 512, 1000, 1000, None, lambda rid: None)
        return {'stream_blocks': p.stream_blocks, 'tokens': p.tokens}
    except ApiError as e:
        return {'status': e.status, 'message': e.message}

print(json.dumps([case({}), case({'stream_blocks': True}), case({'stream_blocks': False}), case({'stream_blocks': 'yes'}), case({'stream_blocks': 1})]))
`

describe.skipIf(!torch.ok)('the torch prefill server takes stream_blocks', () => {
  it('true, false or absent; anything else refused with a 400 naming it', () => {
    const out = execFileSync(TORCH_PYTHON, ['-c', SCRIPT, TORCH_DIR], { encoding: 'utf8', timeout: HANG_LIMIT_MS })
    expect(JSON.parse(out)).toEqual([
      { stream_blocks: false, tokens: [1, 2, 3] },
      { stream_blocks: true, tokens: [1, 2, 3] },
      { stream_blocks: false, tokens: [1, 2, 3] },
      { status: 400, message: "stream_blocks must be true or false, got 'yes'" },
      { status: 400, message: 'stream_blocks must be true or false, got 1' },
    ])
  })
})
