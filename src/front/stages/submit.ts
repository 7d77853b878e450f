// Stage 1, submit: POST /v1/prefill with the tokens to capture and their digest; a 202 is the only
// yes. A silent engine that accepts connections is busy (its event loop held by a chunk), not gone.
import { PD_ERR } from '../../errors.ts'
import { acceptsConnections, callJson, errorMessageOf, isNoAnswer, joinUrl, LinkError } from '../http.ts'
import type { BridgeRun } from './run.ts'
import { stopwatch, type BridgeTimings } from './timings.ts'

/** Ask the prefill engine for the capture of `tokens`; throws the submit's BridgeFailure. */
export async function submitPrefill (run: BridgeRun, tokens: number[], tokensSha256: string, carryId?: string, streamBlocks = false): Promise<Pick<BridgeTimings, 'submit'>> {
  const { config, auth } = run
  const d = config.deadlines
  const prefillUrl = config.prefill.url as string
  const time = stopwatch()
  let answer
  try {
    answer = await callJson('prefill engine', joinUrl(prefillUrl, '/v1/prefill'), {
      method: 'POST',
      json: {
        request_id: run.requestId, tokens, tokens_sha256: tokensSha256,
        ...(config.prefill.memoryBudgetBytes !== undefined ? { memory_budget_bytes: config.prefill.memoryBudgetBytes } : {}),
        ...(carryId === undefined ? {} : { resume: { carry_id: carryId } }),
        ...(streamBlocks ? { stream_blocks: true } : {}),
      },
      timeoutMs: d.submitMs,
      headers: auth,
    })
  } catch (e) {
    if (isNoAnswer(e) && await acceptsConnections(prefillUrl, d.linkMs)) {
      throw run.fail({ reason: `prefill engine busy: no answer to the submit within ${d.submitMs} ms, though it accepts connections`, code: PD_ERR.ENGINE_BUSY }, 'submit')
    }
    throw run.fail({ reason: `prefill engine unreachable: ${e instanceof LinkError ? e.problem : String(e)}`, code: PD_ERR.ENGINE_UNREACHABLE }, 'submit')
  }
  if (answer.status === 429) throw run.fail({ reason: `prefill engine busy: its queue is full (429): ${errorMessageOf(answer.body)}`, code: PD_ERR.ENGINE_BUSY }, 'submit')
  if (answer.status !== 202) throw run.fail({ reason: `prefill engine refused the request (${answer.status}): ${errorMessageOf(answer.body)}`, code: PD_ERR.ENGINE_REFUSED }, 'submit')
  run.accept()
  return { submit: time.ms() }
}
