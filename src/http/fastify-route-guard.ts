// The route guard (route-guard.ts) on a fastify app. fastify routes before any hook runs, so the
// judgement happens in `rewriteUrl`: an allowed request is routed by its canonical spelling, and
// a refused one is answered by an onRequest hook (after the key check), before the body or a handler.
import type { IncomingMessage } from 'node:http'
import { RouteAllowlist, type AllowedRoute, type RefusedTarget } from './route-guard.ts'

/** The route fastify is sent to with a refused target: never registered, and never reached. */
const REFUSED_URL = '/'

/** The guard of one fastify app: pass `rewriteUrl` to Fastify() and add `onRequest` right after the key check. */
export class FastifyRouteGuard {
  readonly allowlist: RouteAllowlist
  private readonly refused = new WeakMap<IncomingMessage, RefusedTarget>()

  constructor (routes: readonly AllowedRoute[], private readonly toError: (refusal: RefusedTarget) => Error) {
    this.allowlist = new RouteAllowlist(routes)
  }

  /** For Fastify({ rewriteUrl }): the canonical URL, or a placeholder while the refusal waits for onRequest. */
  readonly rewriteUrl = (req: IncomingMessage): string => {
    const judged = this.allowlist.judge(req.method ?? '', req.url ?? '')
    if (judged.ok) return judged.url
    this.refused.set(req, judged)
    return REFUSED_URL
  }

  /** The onRequest hook that throws the refusal; it must run before any hook that reads the body or works. */
  readonly onRequest = async (request: { raw: IncomingMessage }): Promise<void> => {
    const refusal = this.refused.get(request.raw)
    if (refusal !== undefined) throw this.toError(refusal)
  }
}
