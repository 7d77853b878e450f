#!/usr/bin/env node
// The published bin: registers tsx's loader so the TypeScript sources run as they are, no build step.
import { register } from 'tsx/esm/api'

register()
const { main } = await import('./main.ts')
await main(process.argv)
