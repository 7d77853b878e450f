// The needle protocol unchanged against a deployment it did not start: `pd-bridge serve --preset
// needle` runs as its own process, and protocols/needle.mjs only gets its front door's URL (the
// model and the geometry come from the server; no tokenizer, so positions are estimated and the
// ledger hashes bytes, as for any OpenAI-compatible endpoint).
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execa } from 'execa'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readNeedleRecords } from '../../verify/needle/record.ts'
import { startServe, type ServeChild } from '../stack/helpers.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'

const ROOT = join(import.meta.dirname, '..', '..')
let dir: string
let serve: ServeChild

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pd-needle-remote-'))
  serve = await startServe(['--preset', 'needle', '--port', '0', '--state-dir', join(dir, 'state')])
})

afterAll(async () => {
  if (serve !== undefined && serve.child.exitCode === null && serve.child.signalCode === null) {
    serve.child.kill('SIGINT')
    await serve.exited
  }
  await rm(dir, { recursive: true, force: true })
})

describe('protocols/needle.mjs --url against a running deployment', () => {
  it('retrieves through that deployment\'s bridge with a complete verdict, positions estimated', async () => {
    const runs = join(dir, 'runs')
    const r = await execa('node', ['protocols/needle.mjs', '--url', serve.ready.url, '--lengths', '2048', '--depths', '0.5', '--needles', '2',
      '--ledger', join(dir, 'ledger.json'), '--runs', runs], { cwd: ROOT, reject: false, timeout: HANG_LIMIT_MS })
    expect(r.exitCode, r.stderr).toBe(0)
    const [rec] = await readNeedleRecords(runs)
    expect(rec.document.positions).toBe('approximate')
    expect(rec.ledger).toMatchObject({ outcome: 'fresh', unit: 'bytes', recorded: true })
    expect(rec.geometry.source).toBe('front-door')
    expect(rec.native).toBeNull()
    expect(rec.bridged!.verdict).toBe('complete')
    expect(rec.bridged!.outcome, `answer ${JSON.stringify(rec.bridged!.answer)} for ${rec.expected}`).toBe('pass')
    expect(rec.bridged!.promptTokens).toBeGreaterThan(1024)
  })
})
