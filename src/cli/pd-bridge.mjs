#!/usr/bin/env node
// The deployment entry: the runtime commands alone, what the embedded stack runs its children with
// (src/stack/child.ts). The published bin with the proof commands too is bin/pd-bridge.mjs.
// It registers tsx's loader so the TypeScript sources run as they are, no build step.
import { register } from 'tsx/esm/api'

register()
const { main } = await import('./main.ts')
await main(process.argv)
