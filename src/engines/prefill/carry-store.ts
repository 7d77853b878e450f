// Carries the engine was sent (PUT /v1/carry/{id}): the decoder's cache at a block boundary, from
// which a warm-extended prompt is prefilled (docs/warm-extend.md). A carry body is streamed to
// `<captureRoot>/.carry/<id>.safetensors.part`, checked (a carry file of this sidecar's geometry and
// layers, standing at a block boundary), then renamed into place; a job that uses it removes it when
// it ends, and start-up removes whatever an earlier engine left. Nothing is held in memory whole.
import { createWriteStream } from 'node:fs'
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises'
import type { IncomingMessage } from 'node:http'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { parseCarryMeta, type CarryMeta } from '../../capture/carry.ts'
import { SafetensorsFile } from '../../formats/safetensors/index.ts'
import { isValidRequestId, REQUEST_ID_PATTERN } from '../../wire/manifest.ts'
import { ApiError, badRequest } from './api-error.ts'
import { pathExists } from '../../formats/path-exists.ts'

/** The directory of carries under a capture root (a dot name: never taken for a capture). */
export const CARRY_DIR = '.carry'

/** What a carry must match to be used by this engine. */
export interface CarryExpectations {
  fingerprint: string
  numLayers: number
  blockSize: number
  maxPositionEmbeddings: number
}

/** A stored carry. */
export interface StoredCarry {
  id: string
  path: string
  bytes: number
  meta: CarryMeta
}

function checkId (id: string): void {
  if (!isValidRequestId(id)) throw badRequest(`carry id ${JSON.stringify(id)} must match ${String(REQUEST_ID_PATTERN)} without '..'`, 'carry_id')
}

/** Where carry `id` lives under `root` (whether or not it exists). */
export function carryPath (root: string, id: string): string {
  checkId(id)
  return join(root, CARRY_DIR, `${id}.safetensors`)
}

/** Check an open carry file against the engine's sidecar; a 400 naming what differs. */
function checkCarry (file: SafetensorsFile, id: string, expect: CarryExpectations): CarryMeta {
  let meta: CarryMeta
  try {
    meta = parseCarryMeta(file.metadata, `carry ${id}`)
  } catch (e) {
    throw badRequest(`the body is not a carry file: ${(e as Error).message}`)
  }
  if (meta.fingerprint !== expect.fingerprint) throw badRequest(`carry ${id} was made under sidecar fingerprint ${meta.fingerprint}, this engine's sidecar is ${expect.fingerprint}`)
  if (meta.numLayers !== expect.numLayers) throw badRequest(`carry ${id} holds ${meta.numLayers} layers, the model has ${expect.numLayers}`)
  if (meta.tokens % expect.blockSize !== 0) throw badRequest(`carry ${id} stands at token ${meta.tokens}, not a block boundary (a multiple of ${expect.blockSize})`)
  if (meta.tokens >= expect.maxPositionEmbeddings) throw badRequest(`carry ${id} stands at token ${meta.tokens}, not below the model's max_position_embeddings (${expect.maxPositionEmbeddings})`)
  return meta
}

/**
 * Receive carry `id` from `req` (application/octet-stream, at most `limit` bytes) into the root's
 * carry directory. A 409 when the id is taken, 413 past the limit, 415 for another type, 400 for a
 * body that is not a carry of this engine's geometry; nothing is left behind by a refused one.
 */
export async function receiveCarry (req: IncomingMessage, root: string, id: string, limit: number, expect: CarryExpectations): Promise<StoredCarry> {
  const path = carryPath(root, id)
  const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase()
  if (type !== 'application/octet-stream') {
    req.resume()
    throw new ApiError(415, 'unsupported_media_type_error', `a carry is sent as application/octet-stream, not ${JSON.stringify(req.headers['content-type'] ?? '')}`)
  }
  const declared = Number(req.headers['content-length'])
  if (Number.isFinite(declared) && declared > limit) {
    req.resume()
    throw new ApiError(413, 'request_too_large_error', `the carry is ${declared} bytes, more than this engine's limit of ${limit} bytes (--max-carry-bytes)`)
  }
  if (await pathExists(path)) {
    req.resume()
    throw new ApiError(409, 'conflict_error', `carry ${JSON.stringify(id)} already exists`, 'carry_id')
  }
  await mkdir(join(root, CARRY_DIR), { recursive: true })
  const part = `${path}.part`
  let size = 0
  try {
    req.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) req.destroy(new ApiError(413, 'request_too_large_error', `the carry is more than this engine's limit of ${limit} bytes (--max-carry-bytes)`))
    })
    await pipeline(req, createWriteStream(part, { flags: 'wx' }))
  } catch (e) {
    await rm(part, { force: true })
    if (e instanceof ApiError) throw e
    throw badRequest(`the carry body was cut off after ${size} bytes (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`)
  }
  let meta: CarryMeta
  try {
    const file = await SafetensorsFile.open(part).catch((e: Error) => { throw badRequest(`the body is not a safetensors file: ${e.message}`) })
    try {
      meta = checkCarry(file, id, expect)
    } finally {
      await file.close()
    }
  } catch (e) {
    await rm(part, { force: true })
    throw e
  }
  await rename(part, path)
  return { id, path, bytes: size, meta }
}

/** The stored carry `id`, or a 400 naming it when there is none. */
export async function findCarry (root: string, id: string): Promise<{ path: string, bytes: number }> {
  const path = carryPath(root, id)
  try {
    return { path, bytes: (await stat(path)).size }
  } catch {
    throw badRequest(`resume.carry_id ${JSON.stringify(id)}: no such carry (send it first with PUT /v1/carry/{id})`, 'resume.carry_id')
  }
}

/** Remove carry `id` (a no-op when it is gone). */
export async function removeCarry (root: string, id: string): Promise<void> {
  await rm(carryPath(root, id), { force: true })
}

/** Start-up: remove every carry an earlier engine left (no job can use them now); their names. */
export async function sweepCarries (root: string): Promise<string[]> {
  const dir = join(root, CARRY_DIR)
  let names: string[]
  try {
    names = await readdir(dir)
  } catch {
    return []
  }
  await rm(dir, { recursive: true, force: true })
  return names
}

