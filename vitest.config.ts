// Three vitest projects over suites/ (docs/testing.md): `unit` (in process, fast), `integration`
// (servers on 127.0.0.1, child processes, checkpoints on disk, or just slow) and `e2e` (the embedded
// stack, the CLI and protocol scripts as a user runs them, the browser, python). `vitest run` runs all
// three in one pool, every file exactly once; `vitest run --project unit` is the quick subset.
//
// The lists below are the classification: each entry is a test file or a folder ending in '/' (every
// test file under it); no wildcards. Every suites/**/*.test.ts file must be in exactly one list.
// A file in none still runs (in `integration`, with a warning here) and fails the unit check
// suites/support/projects.test.ts until it is listed; a file in two lists stops the run here.
import { fileURLToPath } from 'node:url'
import type { ViteUserConfig } from 'vitest/config'
import { HANG_LIMIT_MS } from './suites/support/hang-limit.ts'
import { assignProjects, listTestFiles, type ProjectList } from './suites/support/projects.ts'

/** In process only: no child process, no listening socket, no checkpoint on disk; each file about 2 s or less here. */
export const UNIT: ProjectList = [
  'suites/blocks-store/block-key.test.ts', 'suites/blocks-store/compatibility.test.ts',
  'suites/blocks-store/deepseek-v4-layout.test.ts', 'suites/blocks-store/eviction.test.ts',
  'suites/blocks-store/payload-roundtrip.test.ts', 'suites/blocks-store/restore.test.ts',
  'suites/blocks-store/scan-rescan.test.ts', 'suites/blocks-store/load-chain.test.ts',
  'suites/blocks-store/authentication.test.ts',
  'suites/checkpoint/params.test.ts', 'suites/checkpoint/random.test.ts',
  'suites/cli/native-check.test.ts',
  'suites/consistency/launch.test.ts', 'suites/consistency/seed-case.test.ts',
  'suites/consistency/tables.test.ts',
  'suites/decoders/block-size.test.ts', 'suites/decoders/kind-names.test.ts', 'suites/decoders/registry.test.ts',
  'suites/decoder-server/body.test.ts', 'suites/decoder-server/prompt.test.ts', 'suites/decoder-server/queue.test.ts', 'suites/decoder-server/batcher-schedule.test.ts',
  'suites/decoder-server/reply-stream.test.ts', 'suites/decoder-server/request.test.ts', 'suites/decoder-server/sampling.test.ts', 'suites/decoder-server/sampling-order.test.ts', 'suites/decoder-server/text.test.ts',
  'suites/engine/components.test.ts', 'suites/engine/core-attention.test.ts',
  'suites/formats/corpus.test.ts', 'suites/formats/gguf.test.ts', 'suites/formats/gguf-convert-floats.test.ts', 'suites/formats/golden.test.ts',
  'suites/formats/offset-reads.test.ts', 'suites/formats/roundtrip.test.ts',
  'suites/formats/sharded.test.ts', 'suites/formats/stream-writer.test.ts',
  'suites/formats/strict-json.test.ts', 'suites/formats/tensor.test.ts',
  'suites/formats/writer.test.ts',
  'suites/front/config.test.ts', 'suites/front/error-codes.test.ts', 'suites/front/hop-by-hop.test.ts',
  'suites/front/routing.test.ts', 'suites/front/capture-wake.test.ts', 'suites/front/engine-edges.test.ts',
  'suites/http/route-guard.test.ts',
  'suites/fuzz/block-metadata.test.ts', 'suites/fuzz/gguf.test.ts', 'suites/fuzz/judge.test.ts',
  'suites/fuzz/launch.test.ts',
  'suites/kernels/accuracy.test.ts', 'suites/kernels/attention.test.ts',
  'suites/kernels/batch-invariance.test.ts', 'suites/kernels/bf16-weights.test.ts',
  'suites/kernels/blocks128.test.ts', 'suites/kernels/errors.test.ts',
  'suites/kernels/fma.test.ts', 'suites/kernels/lanes8-fma.test.ts', 'suites/kernels/lane-major.test.ts', 'suites/kernels/decode-tile.test.ts', 'suites/kernels/matmul-grouped.test.ts', 'suites/kernels/moe-experts.test.ts', 'suites/kernels/exact-fma.test.ts', 'suites/kernels/sequential-fma.test.ts',
  'suites/kernels/engine-rows.test.ts', 'suites/kernels/concurrent-calls.test.ts', 'suites/kernels/hc-post.test.ts', 'suites/kernels/indexer.test.ts',
  'suites/kernels/matmul-bitexact.test.ts', 'suites/kernels/mx-round-trip.test.ts', 'suites/kernels/order.test.ts',
  'suites/kernels/pool.test.ts', 'suites/kernels/rmsnorm.test.ts',
  'suites/kernels/round-bf16.test.ts', 'suites/kernels/special-values.test.ts',
  'suites/model/config-defaults.test.ts', 'suites/model/config-styles.test.ts',
  'suites/model/config-validation.test.ts', 'suites/model/rope-apply.test.ts',
  'suites/model/rope-transformers.test.ts', 'suites/model/rope-yarn.test.ts',
  'suites/needle/filler.test.ts', 'suites/needle/geometry.test.ts', 'suites/needle/grid.test.ts',
  'suites/needle/heatmap.test.ts', 'suites/needle/record.test.ts', 'suites/needle/score.test.ts',
  'suites/numerics/bf16.test.ts', 'suites/numerics/e2m1.test.ts', 'suites/numerics/e4m3.test.ts',
  'suites/numerics/e5m2.test.ts', 'suites/numerics/e8m0.test.ts', 'suites/numerics/f16.test.ts',
  'suites/numerics/fp8-block-weight.test.ts', 'suites/numerics/mxfp4.test.ts',
  'suites/numerics/mxfp8.test.ts', 'suites/numerics/round-trip.test.ts',
  'suites/numerics/torch-casts.test.ts',
  'suites/prefill-engine/queue.test.ts',
  'suites/profiles/hadamard.test.ts', 'suites/profiles/profiles.test.ts',
  'suites/profiles/reference-quant.test.ts',
  'suites/progress/progress.test.ts',
  'suites/results/environment.test.ts', 'suites/results/readme-headline.test.ts', 'suites/results/generator.test.ts',
  'suites/results/micro-record.test.ts', 'suites/results/micro-summary.test.ts', 'suites/results/adversary-section.test.ts',
  'suites/results/needle-section.test.ts', 'suites/results/sources.test.ts', 'suites/results/summary.test.ts',
  'suites/results/over-engine.test.ts',
  'suites/share/manifest.test.ts', 'suites/share/range.test.ts',
  'suites/stack/torch-prefill.test.ts', 'suites/stack/units.test.ts', 'suites/stack/doctor-blocks.test.ts',
  'suites/support/projects.test.ts',
  'suites/two-hosts/key-guard.test.ts',
]

/** Real servers on 127.0.0.1, child processes of one component, checkpoints on disk, or in-process but slow. */
export const INTEGRATION: ProjectList = [
  'suites/bitexact/',
  'suites/blocks-bridge/',
  'suites/blocks-store/atomic-write.test.ts', 'suites/blocks-store/crash.test.ts',
  'suites/blocks-store/integrity.test.ts', 'suites/blocks-store/quarantine.test.ts',
  'suites/blocks-store/verify-blocks-cli.test.ts',
  'suites/blocks/',
  'suites/capture/',
  'suites/checkpoint/cli.test.ts', 'suites/checkpoint/layouts.test.ts',
  'suites/checkpoint/loader-errors.test.ts', 'suites/checkpoint/make-load.test.ts',
  'suites/checkpoint/naming.test.ts', 'suites/checkpoint/tokenizer.test.ts',
  'suites/checkpoint/transformers-proof.test.ts',
  'suites/consistency/gate.test.ts', 'suites/consistency/limits.test.ts',
  'suites/consistency/needle-records.test.ts', 'suites/consistency/store-seeds.test.ts',
  'suites/decoder-server/api-key.test.ts', 'suites/decoder-server/batch-invariance.test.ts', 'suites/decoder-server/batching.test.ts', 'suites/decoder-server/degraded.test.ts',
  'suites/decoder-server/deepseek-v4-chat.test.ts', 'suites/decoder-server/streamed-tool-calls.test.ts',
  'suites/decoder-server/health-follows.test.ts', 'suites/decoder-server/memory-budget.test.ts',
  'suites/decoder-server/limits.test.ts', 'suites/decoder-server/no-cache.test.ts',
  'suites/decoder-server/openai.test.ts', 'suites/decoder-server/sampling-openai.test.ts',
  'suites/dump/',
  'suites/engine/chunking.test.ts', 'suites/engine/decode.test.ts', 'suites/engine/decode-batch.test.ts', 'suites/engine/errors.test.ts',
  'suites/engine/reference-quant.test.ts', 'suites/engine/transformers-bf16.test.ts',
  'suites/engine/transformers-f32.test.ts',
  'suites/front/checks.test.ts', 'suites/front/cli.test.ts', 'suites/front/engine-watch.test.ts',
  'suites/front/forward.test.ts', 'suites/front/prompt-agreement.test.ts', 'suites/front/decoder-under-load.test.ts',
  'suites/fuzz/bodies.test.ts', 'suites/fuzz/capture-manifest.test.ts',
  'suites/fuzz/front-config.test.ts', 'suites/fuzz/safetensors.test.ts',
  'suites/fuzz/sidecar-json.test.ts',
  'suites/kernels/fmath.test.ts', 'suites/kernels/isa-parity.test.ts',
  'suites/kernels/rope-rows.test.ts',
  'suites/llama-cpp/authentication.test.ts',
  'suites/llama-cpp/chat-template.test.ts',
  'suites/llama-cpp/decoder.test.ts', 'suites/llama-cpp/deepseek-tokenizer.test.ts', 'suites/llama-cpp/export-gguf.test.ts',
  'suites/llama-cpp/mirror-checkpoint.test.ts', 'suites/llama-cpp/parity.test.ts',
  'suites/llama-cpp/rope-window.test.ts', 'suites/llama-cpp/runner.test.ts', 'suites/llama-cpp/sampling.test.ts',
  'suites/llama-cpp/state.test.ts', 'suites/llama-cpp/target.test.ts', 'suites/llama-cpp/stream-target.test.ts',
  'suites/llama-cpp/ties.test.ts', 'suites/llama-cpp/tokenizer.test.ts',
  'suites/mlx/',
  'suites/needle-checkpoint/',
  'suites/needle/document.test.ts', 'suites/needle/run.test.ts',
  'suites/numerics/block-scale.test.ts',
  'suites/prefill-engine/api.test.ts', 'suites/prefill-engine/crash.test.ts',
  'suites/prefill-engine/delete-and-key.test.ts', 'suites/prefill-engine/recovery.test.ts',
  'suites/prefill-engine/request.test.ts', 'suites/prefill-engine/runner.test.ts',
  'suites/prefill-engine/sidecar-agreement.test.ts', 'suites/prefill-engine/spill.test.ts',
  'suites/prefill-engine/tokens-digest.test.ts', 'suites/prefill-engine/warm-extend.test.ts',
  'suites/profiles/weights.test.ts',
  'suites/progress/native-check.test.ts',
  'suites/results/faults-section.test.ts', 'suites/results/load-section.test.ts', 'suites/results/warm-section.test.ts',
  'suites/results/load-levels-section.test.ts', 'suites/results/batch-section.test.ts',
  'suites/results/cost-chart.test.ts', 'suites/results/apart-leg.test.ts', 'suites/results/two-host-section.test.ts',
  'suites/share/api-key.test.ts', 'suites/share/cli.test.ts', 'suites/share/client-resume.test.ts',
  'suites/share/client-stream.test.ts', 'suites/share/manifest-atomic.test.ts',
  'suites/share/server-http.test.ts', 'suites/share/server-refusals.test.ts', 'suites/share/wait.test.ts',
  'suites/stack/assets.test.ts', 'suites/stack/doctor-store.test.ts',
  'suites/stack/doctor.test.ts', 'suites/stack/supervisor.test.ts',
  'suites/tokenizer/',
]

/** The system as a user drives it: the embedded stack, the CLI and protocol scripts, the browser, python. */
export const E2E: ProjectList = [
  'suites/cli/inspect.test.ts', 'suites/cli/install.test.ts', 'suites/cli/system-errors.test.ts',
  'suites/cli/usage.test.ts',
  'suites/consistency/cli.test.ts', 'suites/consistency/embedded-gate.test.ts', 'suites/consistency/needle-live.test.ts',
  'suites/http/routes.test.ts',
  'suites/front/api-key.test.ts', 'suites/front/authentic-blocks.test.ts', 'suites/front/front.test.ts', 'suites/front/reconcile.test.ts', 'suites/front/retention.test.ts',
  'suites/front/verdict-truth.test.ts', 'suites/front/stall.test.ts', 'suites/front/warm-extend.test.ts', 'suites/front/stream-blocks.test.ts',
  'suites/llama-cpp/demo.test.ts',
  'suites/needle/protocol-smoke.test.ts', 'suites/needle/remote-url.test.ts',
  'suites/progress/protocols-cli.test.ts',
  'suites/results/load-protocol-smoke.test.ts', 'suites/results/load-levels-smoke.test.ts', 'suites/results/needle-protocol.test.ts', 'suites/results/adversary-protocol-smoke.test.ts',
  'suites/results/protocol-smoke.test.ts', 'suites/results/repeat-tests-cli.test.ts',
  'suites/results/report-browser.test.ts',
  'suites/stack/api-key.test.ts', 'suites/stack/demo.test.ts', 'suites/stack/sampling.test.ts', 'suites/stack/serve.test.ts', 'suites/stack/serve-omlx.test.ts',
  'suites/stack/stream-llama-cpp.test.ts',
  'suites/stack/settings.test.ts', 'suites/stack/supervision.test.ts',
  'suites/torch-hook/',
  'suites/two-hosts/bridge.test.ts',
  'suites/two-hosts/delay-relay.test.ts',
]

export const PROJECT_LISTS = { unit: UNIT, integration: INTEGRATION, e2e: E2E } as const

const ROOT = fileURLToPath(new URL('.', import.meta.url))
const assigned = assignProjects(listTestFiles(ROOT), PROJECT_LISTS)
if (assigned.overlaps.length > 0) {
  throw new Error(`vitest.config.ts: test files in more than one project:\n${assigned.overlaps.map((o) => `  ${o.file}: ${o.projects.join(', ')}`).join('\n')}`)
}
if (assigned.unclassified.length > 0) {
  console.warn(`vitest.config.ts: not in any project, run in integration until listed:\n${assigned.unclassified.map((f) => `  ${f}`).join('\n')}`)
}

// The settings every project keeps (vitest 4 projects do not inherit the root's test options).
const common = {
  pool: 'forks',
  // Two cores here: more workers only fight over them.
  maxWorkers: 2,
  // Progress lines appear after a wall-clock interval (src/progress): off for every test and the
  // processes tests start, so no output depends on how loaded the machine is. Tests of progress
  // itself choose their mode explicitly.
  env: { PD_PROGRESS: 'off' },
} as const

// Per-test and per-hook limits. Unit files run in process in about 2 s each: a minute is a hang.
// Integration and e2e files start servers, children and whole stacks, whose honest time grows with
// the machine's load (a demo of 30 s quiet took over 60 s at load 10): their limit is the hang
// limit, far above any honest run, so it catches hangs and never a slow but correct run.
export const UNIT_LIMITS = { testTimeout: 60_000, hookTimeout: 120_000 } as const
export const STACK_LIMITS = { testTimeout: HANG_LIMIT_MS, hookTimeout: HANG_LIMIT_MS } as const

const config: ViteUserConfig = {
  test: {
    ...common,
    // Root only, not in `common`: the root's globalSetup runs once per run whichever projects are
    // selected, and what it provides reaches every project. It makes the shared checkpoints
    // (suites/support/checkpoints.ts); a run of the unit project alone makes none.
    globalSetup: ['./suites/support/global-setup.ts'],
    projects: [
      // Unit files share their worker (isolate: false): one fork per worker instead of one per file,
      // about 10 s instead of about 40 s on this machine (docs/testing.md). So a unit file must leave
      // no global state behind (the check in suites/support/projects.test.ts refuses module mocks,
      // stubbed globals and env, chdir); `vitest run --project unit --isolate` runs them one per fork.
      { test: { ...common, ...UNIT_LIMITS, name: 'unit', include: assigned.files.unit, isolate: false } },
      { test: { ...common, ...STACK_LIMITS, name: 'integration', include: [...assigned.files.integration, ...assigned.unclassified] } },
      { test: { ...common, ...STACK_LIMITS, name: 'e2e', include: assigned.files.e2e } },
    ],
  },
}

export default config
