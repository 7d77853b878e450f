// The bridge case: the prefill engine runs another profile (`prefill`: FP8 block-scaled weights,
// another accumulation order), so its attention inputs are not the decoder's and neither are the
// resulting blocks. What must hold is that the writer's blocks are exactly what the decoder's
// arithmetic (the hook, the decoder's sidecar) makes of those inputs: blocks built here by feeding
// the same inputs to a PoolingHook block by block and mapping each boundary with the decoder's own
// cacheToBlockPayload equal the writer's, N/N; and they do differ from the decoder's native blocks.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdir } from 'node:fs/promises'
import { CaptureSession, PoolingHook } from '../../src/capture/index.ts'
import { cacheToBlockPayload } from '../../src/decode/prefix-cache/index.ts'
import { compareBlockDirs } from '../../src/decode/store/index.ts'
import { streamBlocks } from '../../src/decode/writer/index.ts'
import { BS, bench, cacheDifferences, openStore, prompt, type Bench } from './helpers.ts'

let b: Bench
beforeAll(async () => { b = await bench('blocks-bridge-prefill') })
afterAll(async () => await b.cleanup())

describe('a capture fed by the prefill profile', () => {
  it('700 tokens: the writer\'s blocks == the hook\'s blocks from the same inputs (2/2), != the decoder\'s native ones', async () => {
    const T = 700
    const tokens = prompt(T, 31)
    const hidden = b.ckpt.config.hiddenSize
    const inputs = Array.from({ length: 4 }, () => new Float32Array(T * hidden))
    const root = b.scratch('captures')
    await mkdir(root)
    const session = await CaptureSession.start({ sidecar: b.sidecar, captureRoot: root, requestId: 'prefill-700', tokenCount: T, tokens })
    const engine = b.engine('prefill')
    engine.prefill(tokens, engine.newCache(), {
      logits: 'none',
      maxChunk: 300,
      attnInputHook: (layer, start, rows, count) => {
        inputs[layer].set(rows.subarray(0, count * hidden), start * hidden)
        session.onAttentionInput(layer, start, rows, count)
      },
    })
    await session.finish()

    // Expected: the hook over the same inputs, stopped at each boundary, mapped by the decoder's mapping.
    const expected = await openStore(b, 'expected')
    const keys = expected.store.keysFor(tokens)
    const hook = new PoolingHook(b.sidecar.kvPath)
    for (let k = 0; k < Math.floor(T / BS); k++) {
      for (let layer = 0; layer < 4; layer++) hook.feed(layer, k * BS, inputs[layer].subarray(k * BS * hidden, (k + 1) * BS * hidden), BS)
      await expected.store.put(keys[k], cacheToBlockPayload(b.ckpt.config, hook.toModelCache(), k, BS, { storage: expected.storage }), { parentHash: k > 0 ? keys[k - 1] : null })
    }

    const bridged = await openStore(b, 'bridged')
    await streamBlocks({ dir: session.dir, target: bridged, sidecar: b.sidecar, requestId: 'prefill-700', tokens })
    const verdict = await compareBlockDirs(expected.store.root, bridged.store.root)
    expect(verdict.blocks.flatMap((x) => x.differences)).toEqual([])
    expect(`${verdict.identical}/${verdict.total} identical`).toBe('2/2 identical')

    // Restored, the bridge's blocks are the hook's cache at the last boundary, bit for bit.
    const hit = await bridged.lookup(tokens)
    expect(hit.cachedTokens).toBe(2 * BS)
    expect(cacheDifferences(hit.cache!, hook.toModelCache())).toEqual([])

    // Sensitivity: the decoder's own blocks for these tokens differ (other inputs, other bits).
    const native = await openStore(b, 'native')
    await native.prefillAndStore(b.engine('decoder'), tokens)
    const versusNative = await compareBlockDirs(native.store.root, bridged.store.root)
    expect(versusNative.total).toBe(2)
    expect(versusNative.identical).toBe(0)
  })
})
