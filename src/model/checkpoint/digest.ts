// A checkpoint's identity: what reference fixtures record so a suite can tell they still describe it.
import { createHash } from 'node:crypto'
import { readFile, readdir } from 'node:fs/promises'
import { join } from 'node:path'

async function sha256File (path: string): Promise<Buffer> {
  return createHash('sha256').update(await readFile(path)).digest()
}

/**
 * sha256 over `config.json` and every `*.safetensors` file of `dir` (sorted by name): for each file,
 * its name in UTF-8 then the raw 32-byte sha256 of its contents. harness/hf_reference.py computes the
 * same digest on the CUDA side (`checkpoint_digest`), so the two can be compared.
 */
export async function checkpointDigest (dir: string): Promise<string> {
  const weights = (await readdir(dir)).filter((f) => f.endsWith('.safetensors')).sort()
  const digest = createHash('sha256')
  for (const name of ['config.json', ...weights]) {
    digest.update(Buffer.from(name, 'utf8'))
    digest.update(await sha256File(join(dir, name)))
  }
  return digest.digest('hex')
}
