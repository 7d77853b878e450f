// Directories of JSON records checked by a zod schema: the cold runs, the micro benchmarks and the
// needle runs are read the same way, so their errors name the file and the first bad field alike.
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { z } from 'zod'
import { PdBridgeError } from '../../src/errors.ts'

/** `json` checked against `schema`; the error reads `<file>: <kind> field <path>: <problem>`. */
export function parseRecordJson<T> (schema: z.ZodType<T>, json: unknown, file: string, kind: string): T {
  const result = schema.safeParse(json)
  if (!result.success) {
    const issue = result.error.issues[0]
    const where = issue.path.length > 0 ? issue.path.join('.') : '(record)'
    throw new PdBridgeError(`${file}: ${kind} field ${where}: ${issue.message}`)
  }
  return result.data
}

/** How a directory's errors name its records. */
export interface RecordDirWords {
  /** In "cannot list <plural>". */
  plural: string
  /** What a file that does not parse as JSON is called. */
  notJson: string
}

/** Every `*.json` file in `dir`, sorted by name, through `parse`; a missing directory holds none. */
export async function readRecordDir<T> (dir: string, words: RecordDirWords, parse: (json: unknown, file: string) => T): Promise<Array<{ file: string, record: T }>> {
  let names: string[]
  try {
    names = (await readdir(dir)).filter((n) => n.endsWith('.json')).sort()
  }
  catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw new PdBridgeError(`${dir}: cannot list ${words.plural}: ${(err as Error).message}`)
  }
  const out: Array<{ file: string, record: T }> = []
  for (const name of names) {
    const file = join(dir, name)
    let json: unknown
    try {
      json = JSON.parse(await readFile(file, 'utf8'))
    }
    catch (err) {
      throw new PdBridgeError(`${file}: ${words.notJson}: ${(err as Error).message}`)
    }
    out.push({ file, record: parse(json, file) })
  }
  return out
}
