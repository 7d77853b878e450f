// One decoder kind as one record, in the style of vLLM's connector factory: everything the front
// door, the embedded stack, the demo and the command line need to know about a decoder lives in its
// record (src/decoders/<kind>/index.ts), and src/decoders/registry.ts lists the records. Nothing
// outside a kind's folder asks which kind it is by name; it asks the record (docs/decoder-kinds.md).
import type { KeyObject } from 'node:crypto'
import type { Logger } from 'pino'
import type { BlockKey } from '../config/block-key.ts'
import type { FrontConfig } from '../config/index.ts'
import type { PrefixCacheEvent } from '../decode/prefix-cache/index.ts'
import type { AllowedRoute } from '../http/route-guard.ts'
import type { DeepseekV4Config } from '../model/config.ts'
import type { SidecarCacheMath } from '../wire/sidecar-format.ts'
import type { DemoChecks } from './demo-checks.ts'
import type { RequestRules } from './request-rules.ts'
import type { DecoderTarget } from './target.ts'

/** The front door's `decoder` config section (every kind's keys; a kind reads its own). */
export type DecoderConfig = FrontConfig['decoder']

/** What the front door opens a kind's store with. */
export interface TargetOpenOptions {
  decoder: DecoderConfig
  cacheDir: string
  modelName: string
  cfg: DeepseekV4Config
  blockSize: number
  /** The deployment sidecar's cache math record (absent: the profile's own kv path); a kind whose store records it takes it. */
  cacheMath?: SidecarCacheMath
  /** The deployment's block key: every entry written carries its keyed digest (absent: none). */
  authKey?: KeyObject
  /** The block writer's builder threads (limits.writerBuilders). */
  builders: number
  log: (event: PrefixCacheEvent) => void
}

/** Every option of `pd-bridge decoder`, as commander parses them (a kind reads its own). */
export interface DecoderCommandOptions {
  engine: string
  model: string
  profile: string
  cacheDir?: string
  gguf?: string
  kvCacheType?: 'F32' | 'F16'
  threads?: number
  contextSize?: number
  blockSize: number
  maxCacheBytes?: number
  host: string
  port: number
  modelName?: string
  maxTokens: number
  maxBodyBytes: number
  maxQueue: number
  maxBatch?: number
  batchMemoryBytes?: number
  prefillChunk?: number
  log?: string
}

/** What `pd-bridge decoder` hands a kind's launcher besides the options. */
export interface DecoderLaunchContext {
  logger: Logger
  apiKey?: string
  blockKey?: BlockKey
}

/** A launched decoder: the fields of its JSON ready line (the command adds event and pid) and how to stop it. */
export interface LaunchedKind {
  ready: Record<string, unknown>
  close: () => Promise<void>
}

/** How the embedded stack (serve, demo) runs this kind. */
export interface StackPart {
  /** The embedded checkpoint's indexer heads mirrored, so indexer top-k has no ties (docs/llama-cpp.md). */
  mirrorIndexerHeads: boolean
  /** The decoder needs a GGUF of the checkpoint (made once in the state dir). */
  needsGguf: boolean
  /**
   * Why the transformers prefill engine running in `dtype` (bf16, f32) cannot feed this decoder
   * (undefined: it can; absent: it can in any dtype).
   */
  torchPrefillProblem?: (dtype: string) => string | undefined
  /**
   * How records name this decoder when it is not the default one (verify/results/environment.ts
   * EmbeddedConfig.decoder), running on `threads` CPU threads; absent: records name no decoder.
   */
  environmentLabel?: (threads: number) => string
  /** The block store folder's label beside the checkpoint digest (kinds never share a store). */
  storeLabel: (profile: string) => string
  /** `pd-bridge decoder` flags of this kind (after `--engine <name>`); the stack adds model, store, block size, port. */
  decoderArgs: (o: { profile: string, gguf?: string, threads: number }) => string[]
  /** Keys of the front door's `decoder` section the stack sets for this kind. */
  frontDecoderConfig: Record<string, unknown>
}

/** A flag of `pd-bridge serve` for an external kind, and its help. */
export interface ExternalFlag {
  flag: string
  /** The value's name in --help (`<dir>`). */
  value: string
  help: string
}

/**
 * A decoder that runs outside pd-bridge (oMLX on a Mac): the stack starts no decoder child; the
 * front door forwards to its URL and the bridge writes into its own cache directory, mounted here.
 */
export interface ExternalPart {
  /**
   * The numerics profile the embedded stack's sidecar and prefill engine run in for it, where its
   * cacheMath is a cache math rather than a profile (omlx: mlx-cpu, exported on top of this profile;
   * src/stack/stack-numerics.ts).
   */
  stackProfile: string
  /** The page that says how to run it and point pd-bridge at it (`docs/omlx.md`). */
  docs: string
  /** `pd-bridge serve --decoder <kind>`'s flags for where that decoder is: all three required. */
  serveFlags: { cacheDir: ExternalFlag, url: ExternalFlag, modelName: ExternalFlag }
  /** Check its directory, model name and block size before any work; throws a ConfigError naming the key. */
  checkStore: (o: { cacheDir: string, modelName: string, cfg: DeepseekV4Config, profile: string, blockSize: number }) => void
}

/** What `pd-bridge demo` compares after its two legs, per kind. */
export interface DemoPart {
  /** Added to the table's model row ('' for none). */
  modelNote: string
  /** The native leg's decoder, for the table. */
  nativeLeg: string
  /** The table's last line when the demo passed. */
  passLine: string
  /** Which of the prompt's chained block keys already have an entry in the store at `storeDir`. */
  present: (storeDir: string, keys: readonly string[]) => Promise<string[]>
  /** Compare what the bridge wrote with what the native decoder wrote for the same prompt. */
  compare: (o: DemoCompareOptions) => Promise<DemoChecks>
  /** Why the cache check fails ('' when it holds). */
  problem: (c: DemoChecks) => string
  /** The table's rows for the cache check. */
  rows: (c: DemoChecks) => Array<[string, string]>
}

/** What the demo's comparison gets. */
export interface DemoCompareOptions {
  bridgedStore: string
  nativeStore: string
  modelName: string
  tokens: readonly number[]
  blockSize: number
  /** The prompt's full blocks' chained keys. */
  keys: readonly string[]
  /** Tokens the bridge wrote (its boundary). */
  bridgedTokens: number
  checkpointDir: string
  /** A fresh folder of the run for the comparison's files. */
  workDir: string
}

/** One decoder kind. Adding a kind is one folder with one of these and one line in registry.ts. */
export interface DecoderKind {
  /** The kind's name: `decoder.engine`, `PD_DECODER_ENGINE`, `--engine`, `--decoder`. */
  name: string
  /** One line for --help and docs: what the decoder is and what its store holds. */
  summary: string
  /**
   * Source folders that belong to this kind (relative to the repository root): only these and the
   * registry may name the kind (suites/decoders/kind-names.test.ts).
   */
  homes: readonly string[]
  /**
   * The cache-path arithmetic: the numerics profile whose caches this decoder restores, so the
   * sidecar, the capture hook and the embedded prefill engine compute under it (the embedded stack's
   * profile; with `ours` a deployment may set decoder.profile instead).
   */
  cacheMath: string
  /** Keys of the front door's `decoder` section only this kind reads (docs). */
  configKeys: readonly string[]
  /** The front door's words for what its geometry fingerprint is computed from, in a mismatch report. */
  geometrySource: (decoder: DecoderConfig) => string
  /** `pd-bridge decoder`: the flags only this kind takes, the check of the rest, and the launch. */
  command: {
    flags: readonly string[]
    /** Throw a one-line error for a missing required flag or a flag this kind cannot honour. */
    check: (opts: DecoderCommandOptions) => void
    launch: (opts: DecoderCommandOptions, context: DecoderLaunchContext) => Promise<LaunchedKind>
  }
  /** The store the decoder reads, as the bridge writes it. */
  store: {
    /** What the store holds, for docs and /health (`blocks`, `llama.cpp`). */
    label: string
    /** Whether the front door sweeps dead writers' temporary files from the store at start. */
    sweepTempsAtStart: boolean
    /** Open it as the block writer's target (its geometry fingerprint and sidecar checks come with it). */
    openTarget: (o: TargetOpenOptions) => Promise<DecoderTarget>
  }
  /** The decoder's request rules, run in the front door before any work (decoder.requestRules). */
  requestRules: RequestRules
  /** Client routes of the decoder the front door passes through (its own routes excluded there). */
  clientRoutes: readonly AllowedRoute[]
  stack: StackPart
  /** Present when pd-bridge cannot start this decoder (command.launch refuses): where serve finds the running one. */
  external?: ExternalPart
  demo: DemoPart
}
