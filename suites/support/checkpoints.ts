// The checkpoints and sidecars many suites read, made once per vitest run by global-setup.ts and
// handed to the test files through vitest's provide/inject (docs/testing.md). Each is exactly what
// the suites used to make for themselves (the same preset, seed, profile and block size), so every
// number they compute is unchanged. They are shared read-only: a test that writes into a
// checkpoint or a sidecar directory, or corrupts one, makes its own copy.
import { inject } from 'vitest'
import { loadSidecar, type Sidecar } from '../../src/capture/index.ts'

/** What global-setup.ts provides: folder paths. */
export interface ProvidedCheckpoints {
  /** `makeCheckpoint({ preset: 'tiny', seed: 1 })`. */
  tinyCheckpoint: string
  /** `exportWeights({ model: tinyCheckpoint, profile: 'decoder' })`: the default block size. */
  tinyDecoderSidecar: string
  /** `exportWeights({ model: tinyCheckpoint, profile: 'decoder', blockSize: 256 })`. */
  tinyDecoderSidecar256: string
}

declare module 'vitest' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  export interface ProvidedContext extends ProvidedCheckpoints {}
}

/** The folder of one provided checkpoint or sidecar; refuses clearly when the run made none. */
export function provided (key: keyof ProvidedCheckpoints): string {
  const dir = inject(key) as string | undefined
  if (dir === undefined) throw new Error(`no ${key} was provided: suites/support/global-setup.ts makes it for every run that includes the integration or e2e project`)
  return dir
}

/** The tiny seed-1 checkpoint's folder. */
export function tinyCheckpoint (): string {
  return provided('tinyCheckpoint')
}

/** A provided sidecar, loaded (what exportWeights returns for it). */
export async function providedSidecar (key: 'tinyDecoderSidecar' | 'tinyDecoderSidecar256'): Promise<{ dir: string, sidecar: Sidecar }> {
  const dir = provided(key)
  return { dir, sidecar: await loadSidecar(dir) }
}
