// Where the embedded stack keeps what it makes and reuses: checkpoint, sidecar, capture root,
// decoder block store, logs and the record of the running stack. One directory, so `rm -r` of it
// is a full reset and nothing else on the machine is touched.
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import type { PresetName } from '../model/checkpoint/index.ts'

/** The state directory: an explicit flag, else $PD_STATE_DIR, else ~/.cache/pd-bridge. */
export function resolveStateDir (flag?: string, env: NodeJS.ProcessEnv = process.env): string {
  if (flag !== undefined && flag !== '') return resolve(flag)
  const fromEnv = env.PD_STATE_DIR
  if (fromEnv !== undefined && fromEnv !== '') return resolve(fromEnv)
  return join(homedir(), '.cache', 'pd-bridge')
}

/** Every path the embedded stack uses under one state directory. */
export interface StackPaths {
  stateDir: string
  /** The checkpoint for this preset and seed (made once, reused while its stamp holds). */
  model: string
  /** The decoder's sidecar for that checkpoint, profile and block size. */
  sidecar: string
  /** The prefill engine's capture root (the share serves it). */
  captures: string
  /** Parent of the decoder block stores: one per checkpoint digest, profile and block size (cacheDirFor). */
  caches: string
  /** Where the front door spools captures streamed from the share. */
  spool: string
  /** One log file per process: `<logs>/<name>.log`. */
  logs: string
  /** The front door's config as the stack generated it for this start (child URLs change every start). */
  frontConfig: string
  /** The launch parameters of this start (the gate's first place), beside the generated config. */
  launchFile: string
  /** Your settings for the front door (listen, routing, queue, deadlines, limits, log): read at start, never written. */
  userFrontConfig: string
  /** The record of the running stack (pids, URLs), read by doctor. */
  record: string
  /** Scratch space of demo runs (native cache dirs, comparison copies), one folder per run. */
  runs: string
}

/**
 * The paths of the stack for `preset`/`seed` with decoder blocks of `blockSize` tokens. The files
 * it makes once (checkpoint, sidecar) and the scratch runs live in `stateDir`; what one running
 * stack owns (captures, block store, spool, logs, its config and record) lives in `home`: the state
 * dir itself for `serve`, a folder of its own for each demo run, so the two never meet.
 */
export function stackPaths (stateDir: string, preset: PresetName, seed: number, profile: string, blockSize: number, home = stateDir): StackPaths {
  const name = `${preset}-seed${seed}`
  return {
    stateDir,
    model: join(stateDir, 'models', name),
    sidecar: join(stateDir, 'sidecars', `${name}-${profile}-bs${blockSize}`),
    captures: join(home, 'captures', name),
    caches: join(home, 'cache'),
    spool: join(home, 'spool'),
    logs: join(home, 'logs'),
    frontConfig: join(home, 'run', 'front.json'),
    launchFile: join(home, 'run', 'launch.env'),
    userFrontConfig: join(home, 'front.json'),
    record: join(home, 'stack.json'),
    runs: join(stateDir, 'runs'),
  }
}

/**
 * The decoder's block store for one checkpoint (by digest), profile and block size. Block keys
 * hash the tokens and the model name, not the weights, so a checkpoint made again with other bytes
 * must not find the old one's blocks: the digest in the name gives it a store of its own.
 */
export function cacheDirFor (paths: StackPaths, name: string, checkpointDigest: string, profile: string, blockSize: number): string {
  return join(paths.caches, `${name}-${checkpointDigest.slice(0, 12)}-${profile}-bs${blockSize}`)
}
