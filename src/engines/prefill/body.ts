// Reading a JSON request body with a byte limit. Too large is refused by Content-Length before a
// byte is buffered; a chunked body that outgrows the limit is drained (not kept) and refused.
import type { IncomingMessage } from 'node:http'
import { ApiError, badRequest } from './api-error.ts'

/** True for a Content-Type a JSON API should accept: absent, or application/json (any parameters). */
function isJsonContentType (header: string | undefined): boolean {
  if (header === undefined || header.trim() === '') return true
  const type = header.split(';')[0].trim().toLowerCase()
  return type === 'application/json'
}

function tooLarge (limit: number, size: number | string): ApiError {
  return new ApiError(413, 'request_too_large_error', `the request body is ${size} bytes, more than the limit of ${limit} bytes`)
}

/**
 * Read `req`'s body and parse it as JSON. Refusals are ApiErrors: 415 for a non-JSON Content-Type,
 * 413 past `limit` bytes, 400 for bytes that are not UTF-8 JSON or an empty body.
 */
export async function readJsonBody (req: IncomingMessage, limit: number): Promise<unknown> {
  if (!isJsonContentType(req.headers['content-type'])) {
    req.resume()
    throw new ApiError(415, 'unsupported_media_type_error', `Content-Type ${JSON.stringify(req.headers['content-type'])} is not application/json`)
  }
  const declared = req.headers['content-length']
  if (declared !== undefined && Number(declared) > limit) {
    // Drain what the client still sends, so it can read the answer instead of a reset connection.
    req.resume()
    throw tooLarge(limit, declared)
  }
  const chunks: Buffer[] = []
  let size = 0
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length
      if (size <= limit) chunks.push(chunk)
    }
  }
  catch (e) {
    throw badRequest(`the request body was cut off after ${size} bytes (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`)
  }
  if (size > limit) throw tooLarge(limit, `at least ${size}`)
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks))
  }
  catch {
    throw badRequest('the request body is not valid UTF-8')
  }
  if (text.trim() === '') throw badRequest('the request body is empty; expected a JSON object')
  try {
    return JSON.parse(text)
  }
  catch (e) {
    throw badRequest(`the request body is not valid JSON: ${(e as Error).message}`)
  }
}
