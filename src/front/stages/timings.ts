// What a bridge measures, stage by stage, in milliseconds. The names are the ones clients read in
// `pd_bridge.timings_ms` and the benchmark records keep (protocols/cold-bench.mjs, stagesMs): snake
// case, rounded to 0.1 ms. Each stage returns its own part; the bridge puts them together in order.

/** A finished bridge's timings (a failed one has those of the stages that ran, and bridge_total). */
export type BridgeTimings = {
  /** A warm-extended bridge: restoring the decoder's cache at P, encoding and sending the carry. */
  carry?: number
  /** POST /v1/prefill until its 202. */
  submit: number
  /** The capture source: the engine's prefill and the transfer (local mount or share), overlapped. */
  capture: number
  /**
   * The writer's whole stage: open, every block, finalize. With blocks streamed while the engine
   * runs, only what is left once the capture is sealed (the last segments and the verification).
   */
  block_stage: number
  /** Streamed: when the first block was put, from the start of the capture stage. */
  first_block?: number
  /**
   * Streamed: from seeing the capture sealed to every block written and verified (the last
   * segments, verification: the tail the engine's end leaves).
   */
  after_seal?: number
  /** Streamed, with an engine that stamps its clock (torch): from the submit's POST to the engine's clock starting. */
  engine_start?: number
  /** Streamed, with an engine that stamps its clock (torch): from the engine's clock stopping to the front seeing the seal. */
  seal_seen?: number
  /**
   * Streamed, from the engine's sealed manifest: what writing block segments cost the engine's own
   * thread (`segmentWrite`), and a writer thread's time beside it (`segmentWriter`, torch).
   */
  engine_segment_write?: number
  segment_writer?: number
  /** The decoder's rescan. */
  rescan: number
  /** The capture's retention (the engine's delete, or nothing under capture.retain). */
  capture_delete: number
  /** The prefill engine's own times, from its sealed manifest (else its last status answer). */
  engine_prefill?: number
  engine_queue?: number
  /** The share client's download time, and when its first layer had arrived (share only). */
  transfer?: number
  first_layer?: number
  /** The writer: reading and building the blocks; store.put plus verification. */
  assembly: number
  block_write: number
  /** The whole bridge (the queue excluded). */
  bridge_total: number
}

/** Milliseconds as the timings keep them: 0.1 ms. */
export const round = (ms: number): number => Math.round(ms * 10) / 10

/** A stopwatch over one stage: `ms()` is the time since it was made, rounded. */
export function stopwatch (): { ms: () => number, started: number } {
  const t = performance.now()
  return { ms: () => round(performance.now() - t), started: t }
}
