// vitest globalSetup (vitest.config.ts, root config: it runs once per run, whichever projects are
// selected): make the checkpoints and sidecars of checkpoints.ts into one temporary folder, provide
// their paths, and remove the folder when the run ends. A run of the unit project alone makes
// nothing: unit files touch no checkpoint on disk (vitest.config.ts), and it stays quick.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestProject } from 'vitest/node'
import type { ProvidedCheckpoints } from './checkpoints.ts'

export default async function setup (project: TestProject): Promise<() => void> {
  // With --project, vitest.projects holds only the selected projects.
  if (project.vitest.projects.every((p) => p.name === 'unit')) return () => {}
  // Imported here, not above, so a unit-only run does not even load the model code.
  const { exportWeights } = await import('../../src/capture/index.ts')
  const { makeCheckpoint } = await import('../../src/model/checkpoint/index.ts')
  const root = mkdtempSync(join(tmpdir(), 'pd-bridge-provided-'))
  // The checkpoint's folder is named `tiny`: a server's model name defaults to the folder's name,
  // and the prefill-engine suites expect `tiny` (what they named their own copy).
  const made: ProvidedCheckpoints = {
    tinyCheckpoint: join(root, 'tiny'),
    tinyDecoderSidecar: join(root, 'tiny-decoder'),
    tinyDecoderSidecar256: join(root, 'tiny-decoder-256'),
  }
  await makeCheckpoint({ preset: 'tiny', seed: 1, out: made.tinyCheckpoint })
  await exportWeights({ model: made.tinyCheckpoint, profile: 'decoder', out: made.tinyDecoderSidecar })
  await exportWeights({ model: made.tinyCheckpoint, profile: 'decoder', out: made.tinyDecoderSidecar256, blockSize: 256 })
  for (const [key, dir] of Object.entries(made) as Array<[keyof ProvidedCheckpoints, string]>) project.provide(key, dir)
  return () => rmSync(root, { recursive: true, force: true })
}
