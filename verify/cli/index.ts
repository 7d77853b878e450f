// The proof commands, placed among the runtime ones for --help: the gate right after doctor (the
// deployment checks together), results last. bin/pd-bridge.mjs hands them to src/cli's program.
import type { CommandPlacement } from '../../src/cli/main.ts'
import { gateCommand } from './gate.ts'
import { resultsCommand } from './results.ts'

export const proofCommands: CommandPlacement[] = [
  { command: gateCommand, after: 'doctor' },
  { command: resultsCommand },
]
