// The gate's bridge-vs-native check reports its prefill's progress (src/progress), ticked from the
// hook per layer and chunk: monotone, ending at the prompt's length, on the stream it is given,
// and the check's result is unchanged by it.
import { beforeAll, describe, expect, it } from 'vitest'
import { bridgeVsNative } from '../../verify/gate/native-check.ts'
import type { ProgressLine } from '../../src/progress/index.ts'
import { provided, tinyCheckpoint } from '../support/checkpoints.ts'

// The run's shared tiny seed-1 checkpoint and its 256-block decoder sidecar (suites/support/checkpoints.ts).
let model: string
let sidecar: string
beforeAll(() => {
  model = tinyCheckpoint()
  sidecar = provided('tinyDecoderSidecar256')
})

describe('bridgeVsNative progress', () => {
  it('JSON lines from the hook: monotone, one per layer and chunk, the last one done at the prompt length', async () => {
    const writes: string[] = []
    let t = 0
    // Every tick is a line (interval 0); the clock moves 1 s a read, so rate and ETA are known numbers.
    const result = await bridgeVsNative({
      sidecarDir: sidecar, decoderModelDir: model, profile: 'decoder', tokens: 1088, seed: 7,
      progress: { stream: { write: (s: string) => { writes.push(s); return true } }, mode: 'json', intervalMs: 0, now: () => (t += 1000) },
    })
    expect(result.summary).toBe('32/32 bit-exact')
    const lines = writes.join('').trimEnd().split('\n').map((l) => JSON.parse(l) as ProgressLine)
    // 1,088 tokens are 3 chunks of at most 512, each through 4 layers, then the end line.
    expect(lines).toHaveLength(3 * 4 + 1)
    expect(lines.every((l) => l.progress === 'gate: bridge vs native' && l.total === 1088 && l.unit === 'tokens')).toBe(true)
    const done = lines.map((l) => l.done)
    expect(done).toEqual([...done].sort((a, b) => a - b))
    expect(done.slice(0, 4)).toEqual([128, 256, 384, 512])
    expect(lines.at(-2)).toMatchObject({ done: 1088, eta_s: 0, note: 'layer 4/4' })
    expect(lines.at(-1)).toMatchObject({ done: 1088, state: 'done', eta_s: 0 })
  })

  it('progress: false writes nothing and gives the same result', async () => {
    const result = await bridgeVsNative({ sidecarDir: sidecar, decoderModelDir: model, profile: 'decoder', tokens: 1088, seed: 7, progress: false })
    expect(result.summary).toBe('32/32 bit-exact')
  })
})
