// The one wall-clock limit of the integration and e2e tests: how long a test, a hook, a child
// process or a wait for progress may take before it counts as hung. It detects hangs, never speed:
// an honest run of the slowest test here takes minutes at most, even with every core busy with other
// jobs (load 10 and more on 2 cores), so a slow but correct run never reaches it.
export const HANG_LIMIT_MS = 15 * 60_000
