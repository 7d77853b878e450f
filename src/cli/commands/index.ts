// Every command the CLI offers, in the order --help lists them.
import type { Command } from 'commander'
import { inspectCommand } from './inspect.ts'
import { makeCheckpointCommand } from './make-checkpoint.ts'
import { verifyBlocksCommand } from './verify-blocks.ts'
import { cacheCommand } from './cache.ts'
import { shareCommand } from './share.ts'

export const commands: Command[] = [
  makeCheckpointCommand,
  inspectCommand,
  verifyBlocksCommand,
  cacheCommand,
  shareCommand,
]
