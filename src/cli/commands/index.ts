// Every runtime command, in the order --help lists them: make and inspect, the prefill side, the
// decoder side, then the store tools. The proof commands (gate, results) live in verify/cli and
// join them in bin/pd-bridge.mjs.
import type { Command } from 'commander'
import { cacheCommand } from './cache.ts'
import { decoderCommand } from './decoder.ts'
import { demoCommand } from './demo.ts'
import { diffStateCommand } from './diff-state.ts'
import { doctorCommand } from './doctor.ts'
import { dumpCommand } from './dump.ts'
import { exportGgufCommand } from './export-gguf.ts'
import { exportWeightsCommand } from './export-weights.ts'
import { frontCommand } from './front.ts'
import { inspectCommand } from './inspect.ts'
import { makeCheckpointCommand } from './make-checkpoint.ts'
import { poolCommand } from './pool.ts'
import { prefillEngineCommand } from './prefill-engine.ts'
import { serveCommand } from './serve.ts'
import { shareCommand } from './share.ts'
import { verifyBlocksCommand } from './verify-blocks.ts'

export const runtimeCommands: Command[] = [
  makeCheckpointCommand,
  inspectCommand,
  dumpCommand,
  exportWeightsCommand,
  exportGgufCommand,
  poolCommand,
  prefillEngineCommand,
  shareCommand,
  decoderCommand,
  frontCommand,
  serveCommand,
  demoCommand,
  doctorCommand,
  verifyBlocksCommand,
  diffStateCommand,
  cacheCommand,
]
