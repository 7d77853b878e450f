// Every command the CLI offers, in the order --help lists them.
import type { Command } from 'commander'
import { inspectCommand } from './inspect.ts'
import { makeCheckpointCommand } from './make-checkpoint.ts'

export const commands: Command[] = [
  makeCheckpointCommand,
  inspectCommand,
]
