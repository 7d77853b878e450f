// Bridged end to end / engine and its floor (verify/results/record.ts, docs/torch-rung.md *The
// floor*), as cold-bench records them beside each bridged leg: the ratio of the end to end to the
// engine's prefill, and what it would be if the bridge's own stages took no time (engine + the
// decoder's TTFT after its restore + the answer). Null where a stage the ratio needs is missing.
import { describe, expect, it } from 'vitest'
import { bridgedOverEngine } from '../../verify/results/record.ts'

describe('bridgedOverEngine', () => {
  it('end to end / engine, and (engine + decoder TTFT + answer) / engine', () => {
    // 40 s engine, 51.2 s end to end, first token at 49.6 s (answer 1.6 s), decoder TTFT 2.4 s.
    expect(bridgedOverEngine({ totalMs: 51_200, ttftMs: 49_600, stagesMs: { enginePrefill: 40_000, decoderTtft: 2_400 } }))
      .toEqual({ endToEnd: 1.28, floor: 1.1 })
    // A bridge whose own stages took nothing sits on its floor.
    expect(bridgedOverEngine({ totalMs: 1_300, ttftMs: 1_200, stagesMs: { enginePrefill: 1_000, decoderTtft: 200 } }))
      .toEqual({ endToEnd: 1.3, floor: 1.3 })
  })

  it('null without the engine\'s prefill, the decoder\'s TTFT or the client\'s first token', () => {
    const leg = { totalMs: 2_000, ttftMs: 1_500, stagesMs: { enginePrefill: 1_000, decoderTtft: 300 } }
    expect(bridgedOverEngine({ ...leg, stagesMs: { ...leg.stagesMs, enginePrefill: null } })).toBeNull()
    expect(bridgedOverEngine({ ...leg, stagesMs: { ...leg.stagesMs, enginePrefill: 0 } })).toBeNull()
    expect(bridgedOverEngine({ ...leg, stagesMs: { ...leg.stagesMs, decoderTtft: null } })).toBeNull()
    expect(bridgedOverEngine({ ...leg, ttftMs: null })).toBeNull()
  })
})
