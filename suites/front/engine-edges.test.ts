// Where the engine's clock sits in the streamed capture stage (engineEdges, stream-write.ts): from the
// wall-clock stamps the torch engine keeps in its sealed manifest, the front's POST and the moment it
// saw the seal. An engine that keeps no stamps (ours) gives neither field. engineSegmentCost: what the
// manifest says the block segments cost the engine's thread and its writer thread.
import { describe, expect, it } from 'vitest'
import { engineEdges, engineSegmentCost } from '../../src/front/stages/stream-write.ts'

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

describe('engineSegmentCost', () => {
  it("the manifest's segmentWrite (the engine's thread) and segmentWriter (its writer thread), 0.1 ms; absent, absent", () => {
    expect(engineSegmentCost({ prefill: 9_000, segmentWrite: 74.44, segmentWriter: 1_747.06 })).toEqual({ engine_segment_write: 74.4, segment_writer: 1747.1 })
    expect(engineSegmentCost({ prefill: 9_000, segmentWrite: 2_545 })).toEqual({ engine_segment_write: 2545 })
    expect(engineSegmentCost({ queue: 1, prefill: 2 })).toEqual({})
  })
})
