#!/usr/bin/env node
// The published bin, and the command line's composition root: src/cli's runtime program plus
// verify/cli's proof commands (gate, results). It sits outside both so that src/ never imports
// verify/. It registers tsx's loader so the TypeScript sources run as they are, no build step.
// A deployment's own processes (the embedded stack's children) run src/cli/pd-bridge.mjs instead,
// the runtime commands alone.
import { register } from 'tsx/esm/api'

register()
const { main } = await import('../src/cli/main.ts')
const { proofCommands } = await import('../verify/cli/index.ts')
await main(process.argv, proofCommands)
