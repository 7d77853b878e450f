// OpenBLAS's sgemm through numpy, timed in a child process next to our matmul rows
// (protocols/bench-kernels.ts): the speed reference the kernel goals are stated against. The child
// is protocols/openblas/sgemm_server.py, one JSON line per shape; it is started once per run.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { createInterface, type Interface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const SERVER = fileURLToPath(new URL('./sgemm_server.py', import.meta.url))

/** What the child says about itself: numpy's version, the BLAS libraries loaded, OpenBLAS's config. */
export interface OpenBlasInfo {
  numpy: string
  blas: string[]
  openblas: string | null
}

/** One timed shape: the median and mean of `samples` calls. */
export interface OpenBlasTiming {
  p50Ms: number
  meanMs: number
  samples: number
}

/** A running sgemm child. */
export interface OpenBlas {
  info: OpenBlasInfo
  /** y = x @ w.T for x [m, k], w [n, k] float32, timed for about `timeMs`. */
  time (m: number, k: number, n: number, timeMs: number): Promise<OpenBlasTiming>
  close (): void
}

/**
 * Start the child with `python` (default $PDB_OPENBLAS_PYTHON, else /usr/bin/python3, Debian's, which
 * has python3-numpy) on `threads` OpenBLAS threads. Resolves to null, with the reason, when numpy
 * cannot be imported: the benchmark then records no OpenBLAS rows and says why.
 */
export async function startOpenBlas (threads: number, python = process.env.PDB_OPENBLAS_PYTHON ?? '/usr/bin/python3'): Promise<OpenBlas | { error: string }> {
  let child: ChildProcessWithoutNullStreams
  try {
    child = spawn(python, [SERVER], { env: { ...process.env, OPENBLAS_NUM_THREADS: String(threads), OMP_NUM_THREADS: String(threads) } })
  } catch (e) {
    return { error: `${python} cannot be started: ${(e as Error).message}` }
  }
  let stderr = ''
  child.stderr.on('data', (d: Buffer) => { stderr += d.toString() })
  const lines: Interface = createInterface({ input: child.stdout })
  const queue: Array<(line: string | null) => void> = []
  lines.on('line', (line) => queue.shift()?.(line))
  const ended = new Promise<void>((resolve) => {
    child.on('close', () => { resolve(); for (const waiter of queue.splice(0)) waiter(null) })
    child.on('error', () => resolve())
  })
  const next = async (): Promise<string | null> => await new Promise((resolve) => queue.push(resolve))
  const first = await Promise.race([next(), ended.then(() => null)])
  if (first === null) return { error: `${python} ${SERVER} exited: ${stderr.trim().split('\n').pop() ?? 'no output'}` }
  const info = JSON.parse(first) as OpenBlasInfo
  return {
    info,
    async time (m, k, n, timeMs) {
      child.stdin.write(JSON.stringify({ m, k, n, timeMs }) + '\n')
      const line = await next()
      if (line === null) throw new Error(`the OpenBLAS child exited: ${stderr.trim().split('\n').pop() ?? ''}`)
      return JSON.parse(line) as OpenBlasTiming
    },
    close () { child.stdin.end(); child.kill() },
  }
}
