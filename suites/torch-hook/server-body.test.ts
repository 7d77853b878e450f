// The torch prefill server's body reader (src/engines/torch/prefill_server/body.py) on asyncio's own
// StreamReader fed as a socket feeds it, in 64 KiB pieces: the whole body comes back, not the first
// piece (the H200's 32K-token submit was cut at 65,378 bytes and refused as "not JSON"), and one byte
// over the limit is a 413. Standard library only: runs wherever a python3 is.
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

const TORCH_DIR = fileURLToPath(new URL('../../src/engines/torch', import.meta.url))

const SCRIPT = `
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
from prefill_server.body import read_body
from prefill_server.api_error import ApiError

async def case(size, limit, piece):
    s = asyncio.StreamReader()
    data = bytes((i * 7 + 3) % 251 for i in range(size))
    async def feed():
        for o in range(0, size, piece):
            s.feed_data(data[o:o + piece])
            await asyncio.sleep(0)
        s.feed_eof()
    feeder = asyncio.ensure_future(feed())
    try:
        got = await read_body(s, limit)
        out = {'size': len(got), 'equal': got == data}
    except ApiError as e:
        out = {'status': e.status, 'message': e.message}
    await feeder
    return out

async def main():
    cases = [(300_000, 1 << 20, 65_536), (65_536, 1 << 20, 65_536), (0, 1 << 20, 65_536), (1001, 1000, 64), (1000, 1000, 64)]
    print(json.dumps([await case(*c) for c in cases]))

asyncio.run(main())
`

describe('the torch prefill server reads the whole body', () => {
  it('several 64 KiB pieces, one piece, empty, one byte over the limit, exactly the limit', () => {
    const out = execFileSync('python3', ['-c', SCRIPT, TORCH_DIR], { encoding: 'utf8', timeout: HANG_LIMIT_MS })
    expect(JSON.parse(out)).toEqual([
      { size: 300_000, equal: true },
      { size: 65_536, equal: true },
      { size: 0, equal: true },
      { status: 413, message: 'the body is over 1000 bytes' },
      { size: 1000, equal: true },
    ])
  })
})
