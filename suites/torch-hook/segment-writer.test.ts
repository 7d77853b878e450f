// The torch hook's segment writer thread (src/engines/torch/pd_torch_hook/segments.py): the engine's
// thread cuts a block's segment and goes on; the file, its sha256, its fsync and the index are the
// writer's. With the writer's disk stalled (its write waits on an event), the whole prompt's hook
// calls and flushes must return with every block handed over and none listed; released, the seal
// lists them all. A write that fails seals the capture failed (never done) with the error, the index
// a prefix; a capture failed while the writer is stalled gets nothing written after its seal.
// Byte identity with the write-after path is suites/torch-hook/segments.test.ts's.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { providedSidecar } from '../support/checkpoints.ts'
import { HANG_LIMIT_MS } from '../support/hang-limit.ts'
import { torchAvailability, TORCH_PYTHON } from './python.ts'

const TORCH_DIR = fileURLToPath(new URL('../../src/engines/torch', import.meta.url))
const torch = torchAvailability()

// argv: torch dir, sidecar dir, capture root. Prints one JSON line: each case's outcome.
const SCRIPT = `
import json, os, sys, threading
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
import torch
from pd_torch_hook import CaptureSession, load_sidecar
from pd_torch_hook import segments as seg

sidecar, root = load_sidecar(sys.argv[2]), sys.argv[3]
T, CHUNK = 1024, 256
real_write = seg.write_file_atomic

def run(case):
    gate = threading.Event()
    def stalled_write(path, data):
        gate.wait(120)
        if case == 'failing' and path.endswith('segment-000001.safetensors'):
            raise OSError('disk full (test)')
        real_write(path, data)
    seg.write_file_atomic = stalled_write
    if case == 'failing':
        gate.set()
    s = CaptureSession.start(sidecar, root, case, T, device='cpu', segments=True)
    g = torch.Generator().manual_seed(7)
    xs = [torch.randn(T, s.kv.hidden, generator=g).to(torch.bfloat16).float() for _ in range(sidecar.num_layers)]
    out = {}
    try:
        for start in range(0, T, CHUNK):
            for layer, x in enumerate(xs):
                s.on_attention_input(layer, start, x[start:start + CHUNK])
            s.flush()
        out['takenBeforeSeal'], out['listedBeforeSeal'] = s.segments_taken, s.segments_published
        if case == 'abandoned':
            opener = threading.Timer(0.5, gate.set)  # the write in hand finishes while fail() waits for it
            opener.start()
            s.fail(RuntimeError('engine shut down (test)'))
            opener.join()
        else:
            gate.set()
            s.finish()
    except Exception as e:
        out['raised'] = str(e)
        s.fail(e)  # as the server's runner does (a no-op once sealed)
    d = os.path.join(root, case)
    m = json.load(open(os.path.join(d, 'manifest.json')))
    files = sorted(f for f in os.listdir(d) if f.startswith('segment-'))
    idx = os.path.join(d, 'segments.json')
    listed = [x['block'] for x in json.load(open(idx))['segments']] if os.path.exists(idx) else []
    out.update({'state': m['state'], 'error': m.get('error'), 'files': files, 'listed': listed, 'threads': threading.active_count()})
    return out

print(json.dumps({case: run(case) for case in ('stalled', 'failing', 'abandoned')}))
`

interface Outcome {
  takenBeforeSeal?: number
  listedBeforeSeal?: number
  raised?: string
  state: string
  error?: string
  files: string[]
  listed: number[]
  threads: number
}

const roots: string[] = []
afterAll(() => { for (const r of roots) rmSync(r, { recursive: true, force: true }) })

let outcomes: Record<'stalled' | 'failing' | 'abandoned', Outcome> | undefined
/** The three cases, in one child (torch loads once). */
async function run (which: 'stalled' | 'failing' | 'abandoned'): Promise<Outcome> {
  if (outcomes === undefined) {
    const { dir } = await providedSidecar('tinyDecoderSidecar256')
    const root = mkdtempSync(join(tmpdir(), 'pd-segwriter-'))
    roots.push(root)
    const out = execFileSync(TORCH_PYTHON, ['-c', SCRIPT, TORCH_DIR, dir, root], { encoding: 'utf8', timeout: HANG_LIMIT_MS })
    outcomes = JSON.parse(out.trim().split('\n').pop() ?? '') as typeof outcomes
  }
  return (outcomes as Record<string, Outcome>)[which] as Outcome
}

describe.skipIf(!torch.ok)('the torch hook\'s segment writer thread', () => {
  it('a stalled disk does not stall the engine: every block handed over, none listed, until the writer runs; the seal lists all 4', async () => {
    const o = await run('stalled')
    expect(o).toMatchObject({ takenBeforeSeal: 4, listedBeforeSeal: 0, state: 'done', listed: [0, 1, 2, 3] })
    expect(o.files).toEqual([0, 1, 2, 3].map((k) => `segment-00000${k}.safetensors`))
    expect(o.threads).toBe(1) // the writer stopped with the seal
  })

  it('a write that fails seals the capture failed with its error; the index lists the prefix before it', async () => {
    const o = await run('failing')
    expect(o.state).toBe('failed')
    expect(o.error).toContain('disk full (test)')
    expect(o.raised).toContain('disk full (test)')
    expect(o.listed).toEqual([0])
    expect(o.threads).toBe(1)
  })

  it('a capture failed while the writer is stalled: nothing is written after the failed seal', async () => {
    const o = await run('abandoned')
    expect(o).toMatchObject({ takenBeforeSeal: 4, listedBeforeSeal: 0, state: 'failed', error: 'engine shut down (test)' })
    // The writer held block 0 when the capture failed; that file may land, nothing after it, and no index.
    expect(o.files.length).toBeLessThanOrEqual(1)
    expect(o.listed).toEqual([])
    expect(o.threads).toBe(1)
  })
})
