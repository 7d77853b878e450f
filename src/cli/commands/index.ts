// Every command the CLI offers, in the order --help lists them.
import type { Command } from 'commander'

export const commands: Command[] = []
