// The streamed write's wait (src/front/stages/capture-wake.ts): on a local capture directory it ends
// when the engine renames a file into it, not after the poll interval; through the share it is the
// mirror's long poll, with a short sleep only where the share answered at once. The interval here is an hour,
// so a wait that missed the change would hang the test (the hang limit), never pass slowly.
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { CaptureWake, SHARE_POLL_MS } from '../../src/front/stages/capture-wake.ts'

const HOUR = 3_600_000
const roots: string[] = []
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true })
})

function root (): string {
  const r = mkdtempSync(join(tmpdir(), 'capture-wake-'))
  roots.push(r)
  return r
}

// As the engine publishes: write a temporary file, then rename it into place.
function publish (dir: string, name: string): void {
  writeFileSync(join(dir, `.${name}.tmp`), '{}')
  renameSync(join(dir, `.${name}.tmp`), join(dir, name))
}

describe('CaptureWake', () => {
  it('a watched directory: the first wait looks again at once, the next ends at the rename', async () => {
    const dir = root()
    const wake = new CaptureWake({ dir }, HOUR, new AbortController().signal)
    await wake.wait()
    const waiting = wake.wait()
    setImmediate(() => publish(dir, 'segments.json'))
    await waiting
    wake.close()
  })

  it('a change between two waits is not lost', async () => {
    const dir = root()
    const wake = new CaptureWake({ dir }, HOUR, new AbortController().signal)
    await wake.wait()
    publish(dir, 'manifest.json')
    // The event arrives on the event loop; the wait after it returns without a second change.
    await new Promise((resolve) => setTimeout(resolve, 50))
    await wake.wait()
    wake.close()
  })

  it('a directory not made yet: the poll, then the watch once it exists', async () => {
    const dir = join(root(), 'req-1')
    const wake = new CaptureWake({ dir }, 5, new AbortController().signal)
    await wake.wait() // no directory: the 5 ms poll
    mkdirSync(dir)
    await wake.wait() // the watch starts: looks again at once
    const slow = new CaptureWake({ dir }, HOUR, new AbortController().signal)
    await slow.wait()
    const waiting = slow.wait()
    setImmediate(() => publish(dir, 'segment-000000.safetensors'))
    await waiting
    slow.close()
    wake.close()
  })

  it('an abort ends a wait', async () => {
    const dir = root()
    const stop = new AbortController()
    const wake = new CaptureWake({ dir }, HOUR, stop.signal)
    await wake.wait()
    const waiting = wake.wait()
    stop.abort()
    await waiting
    wake.close()
  })

  it('the share: a long poll that waited or saw a change returns at once; one answered at once sleeps a short poll, never the interval', async () => {
    expect(SHARE_POLL_MS).toBeLessThan(250)
    const asked: string[] = []
    const waited = new CaptureWake({ longPoll: async () => { asked.push('waited'); return true } }, HOUR, new AbortController().signal)
    await waited.wait()
    const unheld = new CaptureWake({ longPoll: async () => { asked.push('at once'); return false } }, HOUR, new AbortController().signal)
    await unheld.wait()
    expect(asked).toEqual(['waited', 'at once'])
  })
})
