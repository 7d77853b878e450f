// Two captures of the same request compared layer file by layer file: the torch hook's against the
// TypeScript hook's. Distances per tensor are printed (identical fraction, ulp histogram); the count
// of byte-identical files and every tensor's distance are returned for the test to judge.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect } from 'vitest'
import { readManifest } from '../../src/wire/manifest.ts'
import { describeDistances, layerFileDistances, type TensorDistance } from '../../harness/layer-file-distance.ts'

export interface CaptureComparison {
  identicalFiles: number
  files: number
  distances: TensorDistance[]
}

export async function compareCaptures (label: string, torchDir: string, tsDir: string): Promise<CaptureComparison> {
  const ours = await readManifest(torchDir)
  const ref = await readManifest(tsDir)
  expect(ours.layers.map((e) => e.index)).toEqual(ref.layers.map((e) => e.index))
  let identicalFiles = 0
  const all: TensorDistance[] = []
  for (const e of ref.layers) {
    const a = readFileSync(join(torchDir, e.file))
    const b = readFileSync(join(tsDir, e.file))
    const same = Buffer.compare(a, b) === 0
    if (same) identicalFiles++
    const d = layerFileDistances(a, b)
    all.push(...d)
    console.log(describeDistances(`${label}, ${e.file} (${same ? 'byte-identical' : 'DIFFERENT BYTES'})`, d))
  }
  const elements = all.reduce((s, d) => s + d.elements, 0)
  const identical = all.reduce((s, d) => s + d.identical, 0)
  const worst = Math.max(...all.map((d) => d.worstUlps))
  console.log(`${label}: ${identicalFiles}/${ref.layers.length} layer files byte-identical; ${identical}/${elements} elements identical (${(100 * identical / elements).toFixed(4)}%), worst ${worst} ulp over ${all.length} tensors`)
  return { identicalFiles, files: ref.layers.length, distances: all }
}

/** The names of the tensors that are not every element identical (a shape or dtype mismatch counts). */
export function differingTensors (r: CaptureComparison): string[] {
  return r.distances.filter((d) => d.mismatch !== undefined || d.identical !== d.elements).map((d) => d.name)
}
