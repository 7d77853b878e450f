// Where the engine's clock sits in the streamed capture stage (engineEdges, stream-write.ts): from the
// wall-clock stamps the torch engine keeps in its sealed manifest, the front's POST and the moment it
// saw the seal. An engine that keeps no stamps (ours) gives neither field.
import { describe, expect, it } from 'vitest'
import { engineEdges } from '../../src/front/stages/stream-write.ts'

describe('engineEdges', () => {
  it('engine_start: the POST to the clock starting; seal_seen: the clock stopping to the seal seen (0.1 ms)', () => {
    const posted = 1_800_000_000_000.25
    const t = { queue: 0.4, prefill: 19_272.1, prefillStartAt: posted + 3.21, prefillEndAt: posted + 3.21 + 19_272.1 }
    expect(engineEdges(t, posted, t.prefillEndAt + 125.04)).toEqual({ engine_start: 3.2, seal_seen: 125 })
  })

  it('clocks of two processes: a seal seen a little "before" the stamp stays negative, not hidden', () => {
    expect(engineEdges({ prefillStartAt: 100, prefillEndAt: 200 }, 99, 199.5)).toEqual({ engine_start: 1, seal_seen: -0.5 })
  })

  it('no stamps, no fields; one stamp, its field only', () => {
    expect(engineEdges({ queue: 1, prefill: 2 }, 0, 10)).toEqual({})
    expect(engineEdges({ prefillEndAt: 5 }, 0, 10)).toEqual({ seal_seen: 5 })
  })
})
