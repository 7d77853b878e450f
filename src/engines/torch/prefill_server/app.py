"""The HTTP API (docs/prefill-engine.md): POST /v1/prefill, GET and DELETE /v1/prefill/{id},
GET /health, GET /v1/models and nothing else, every refusal as {"error": {...}} with the embedded
engine's statuses. Every target is judged by the shared route guard (route_guard.py) on its raw
spelling, never by aiohttp's own normalization. With PD_API_KEY set, every route but a bare /health
needs Authorization: Bearer <key>; without the key no answer names an absolute path."""
import asyncio
import collections
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil

from aiohttp import web

from pd_torch_hook import manifest as mf

from .api_error import ApiError, bad_request
from .body import read_body
from .redact import path_redactor
from .request import parse
from .route_guard import Refused, judge
from .runner import Job, run_job

REMEMBERED = 1024
DELETING_PREFIX = '.deleting-'  # a renamed capture on its way out: never a request id, swept at start
UNAUTHORIZED = 'missing or wrong API key: send Authorization: Bearer <PD_API_KEY>'


def key_matches(header: str, key: str) -> bool:
    """Constant time: both sides hashed, so neither the key nor its length shows in the timing."""
    m = re.match(r'^Bearer +(\S+) *$', header or '', re.IGNORECASE)
    given = hashlib.sha256((m.group(1) if m else '').encode()).digest()
    return hmac.compare_digest(given, hashlib.sha256(key.encode()).digest()) and m is not None


def sweep_deletions(root: str) -> None:
    for name in os.listdir(root):
        if name.startswith(DELETING_PREFIX):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


class Engine:
    def __init__(self, model, tokenizer, sidecar, root, opts):
        self.model, self.tokenizer, self.sidecar, self.root, self.opts = model, tokenizer, sidecar, root, opts
        self.queue = collections.deque()
        self.jobs = collections.OrderedDict()
        self.running = None
        self.stopping = False
        self.wake = asyncio.Event()
        self.rate = None  # tokens per second of the last prefill, for Retry-After

    def check_id(self, rid: str) -> None:
        try:
            mf.check_request_id(rid)
        except ValueError as e:
            raise bad_request(str(e), 'request_id')
        if rid in self.jobs or os.path.exists(os.path.join(self.root, rid)):
            raise ApiError(409, 'conflict_error', f'request_id {rid!r} is already queued, running, remembered or captured', 'request_id')

    async def worker(self) -> None:
        while not self.stopping:
            if not self.queue:
                self.wake.clear()
                await self.wake.wait()
                continue
            job = self.queue.popleft()
            self.running = job
            await run_job(job, self.model, self.sidecar, self.root, self.opts.max_chunk, self.opts.device, lambda: self.stopping)
            if job.timings.get('prefill'):
                self.rate = job.prefilled / (job.timings['prefill'] / 1000)
            self.running = None
            while len(self.jobs) > REMEMBERED:
                old = next(iter(self.jobs))
                if self.jobs[old].state in ('queued', 'running'):
                    break
                self.jobs.pop(old)

    def retry_after(self) -> str:
        left = 0 if self.running is None else len(self.running.tokens) - self.running.prefilled
        return str(max(1, int(left / self.rate) if self.rate else 1))


def _status(job: Job, engine: Engine) -> dict:
    out = {'request_id': job.id, 'state': job.state, 'token_count': len(job.tokens), 'tokens_sha256': job.tokens_sha256, 'sealed_length': job.sealed_length,
           'prefilled_tokens': job.prefilled, 'timings': job.timings}
    # A chunk of a long prompt can outlast the front's progress deadline; the hook's row count moves per layer.
    out['hook_rows'] = job.session.rows_seen if job.session is not None else job.hook_rows
    if job.state == 'queued':
        out['queue_position'] = list(engine.queue).index(job) + (1 if engine.running else 0)
    if job.error:
        out['error'] = job.error
    return out


def make_app(engine: Engine, api_key=None) -> web.Application:
    opts = engine.opts
    api_key = api_key if api_key is not None else (os.environ.get('PD_API_KEY') or None)

    redact = path_redactor([(engine.root, 'captureRoot'), (getattr(opts, 'model', None), 'model'), (getattr(opts, 'sidecar', None), 'sidecar')])

    @web.middleware
    async def shown(request, handler):
        """Absolute paths are the key holder's; with no key configured nobody holds it."""
        response = await handler(request)
        holds_key = api_key is not None and key_matches(request.headers.get('Authorization', ''), api_key)
        if not holds_key and isinstance(response, web.Response) and response.text is not None:
            response.text = redact(response.text)
        return response

    @web.middleware
    async def auth(request, handler):
        if api_key is None or key_matches(request.headers.get('Authorization', ''), api_key):
            return await handler(request)
        if request.method == 'GET' and request.path == '/health':
            return web.json_response({'status': 'stopping' if engine.stopping else 'ok'})
        err = ApiError(401, 'authentication_error', UNAUTHORIZED, headers={'WWW-Authenticate': 'Bearer'})
        return web.json_response(err.body(), status=401, headers=err.headers)

    @web.middleware
    async def errors(request, handler):
        try:
            return await handler(request)
        except ApiError as e:
            return web.json_response(e.body(), status=e.status, headers=e.headers)
        except web.HTTPMethodNotAllowed as e:
            allow = ', '.join(sorted(e.allowed_methods))
            err = ApiError(405, 'method_not_allowed_error', f'{request.method} is not allowed on {request.path}; allowed: {allow}', headers={'Allow': allow})
            return web.json_response(err.body(), status=405, headers=err.headers)
        except web.HTTPNotFound:
            return web.json_response(ApiError(404, 'not_found_error', f'no such resource: {request.path}').body(), status=404)

    async def submit(request, _params):
        if engine.stopping:
            raise ApiError(503, 'service_unavailable_error', 'the engine is shutting down')
        ctype = request.headers.get('Content-Type', '').split(';')[0].strip()
        if ctype not in ('', 'application/json'):
            raise ApiError(415, 'unsupported_media_type_error', f'Content-Type {ctype} is not application/json')
        if request.content_length is not None and request.content_length > opts.max_body_bytes:
            raise ApiError(413, 'request_too_large_error', f'the body is {request.content_length} bytes, over {opts.max_body_bytes}')
        raw = await read_body(request.content, opts.max_body_bytes)
        try:
            body = json.loads(raw)
        except ValueError as e:
            raise bad_request(f'the body is not JSON: {e}')
        cfg = engine.model.config
        rid, tokens, budget, digest, stream = parse(body, cfg.vocab_size, opts.max_tokens, cfg.max_position_embeddings, engine.tokenizer, engine.check_id)
        if len(engine.queue) >= opts.max_queue:
            raise ApiError(429, 'rate_limit_error', f'{opts.max_queue} requests already wait', headers={'Retry-After': engine.retry_after()})
        job = Job(rid, tokens, budget if budget is not None else opts.memory_budget, digest, stream)
        engine.jobs[rid] = job
        engine.queue.append(job)
        position = len(engine.queue) - 1 + (1 if engine.running else 0)
        engine.wake.set()
        url = f'{request.scheme}://{request.host}/v1/prefill/{rid}'
        return web.json_response({'request_id': rid, 'status_url': url, 'token_count': len(tokens), 'queue_position': position},
                                 status=202, headers={'Location': f'/v1/prefill/{rid}'})

    async def status(request, params):
        rid = params['id']
        job = engine.jobs.get(rid)
        if job is not None:
            return web.json_response(_status(job, engine))
        try:
            m = mf.read(os.path.join(engine.root, rid))
        except (OSError, ValueError):
            raise ApiError(404, 'not_found_error', f'no request {rid!r} here')
        return web.json_response({'request_id': rid, 'state': m['state'], 'token_count': m['tokenCount'],
                                  **({'tokens_sha256': m['tokensSha256']} if m.get('tokensSha256') else {}), 'sealed_length': m['sealedLength'],
                                  'prefilled_tokens': m['sealedLength'], 'timings': m['timings'], **({'error': m['error']} if 'error' in m else {})})

    async def delete(request, params):
        rid = params['id']
        job = engine.jobs.get(rid)
        if job is not None and job.state in ('queued', 'running'):
            raise ApiError(409, 'conflict_error', f'request {rid!r} is {job.state}: a capture can be deleted only once it is sealed')
        try:
            mf.check_request_id(rid)
            directory = os.path.join(engine.root, rid)
        except ValueError:
            directory = None
        if directory is None or not os.path.isdir(directory):
            if job is None:
                raise ApiError(404, 'not_found_error', f'no request {rid!r} here')
        else:
            try:
                state = mf.read(directory)['state']
            except (OSError, ValueError):
                state = None
            if job is None and state == 'running':
                raise ApiError(409, 'conflict_error', f'the capture of {rid!r} is running: it can be deleted only once it is sealed')
            # Renamed first (the share and status polls stop finding it at once), then removed.
            doomed = os.path.join(engine.root, f'{DELETING_PREFIX}{rid}-{secrets.token_hex(4)}')
            os.rename(directory, doomed)
            await asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, doomed, True)
        engine.jobs.pop(rid, None)
        return web.json_response({'request_id': rid, 'deleted': True})

    # Continuing a warm-extended prompt exactly would need transformers' own cache of the prefix (its
    # bf16 windows and pooled entries, from its own forward); the decoder keeps its own cache, not
    # that one. The front door then bridges such prompts from token 0 (docs/warm-extend.md).
    WARM_EXTEND = {'supported': False, 'reason': "transformers continues only from its own cache of the prefix, which the decoder does not keep (it keeps its own); the prompt is bridged from token 0"}

    async def health(_request, _params):
        return web.json_response({'status': 'stopping' if engine.stopping else 'ok', 'model': opts.model_name, 'profile': 'transformers',
                                  'sidecar_fingerprint': engine.sidecar.fingerprint, 'queue_length': len(engine.queue),
                                  'running': engine.running.id if engine.running else None, 'max_queue': opts.max_queue,
                                  'max_tokens': opts.max_tokens, 'prefix_caching': False, 'warm_extend': WARM_EXTEND,
                                  # Takes `stream_blocks`: block segments published after every chunk (runner.py).
                                  'stream_blocks': True})

    async def models(_request, _params):
        return web.json_response({'object': 'list', 'data': [{'id': opts.model_name, 'object': 'model', 'owned_by': 'pd-bridge',
                                                              'max_model_len': engine.model.config.max_position_embeddings}]})

    routes = [
        (('GET',), '/health', health),
        (('GET',), '/v1/models', models),
        (('POST',), '/v1/prefill', submit),
        (('GET',), '/v1/prefill/:id', status),
        (('DELETE',), '/v1/prefill/:id', delete),
    ]

    async def dispatch(request):
        # The raw target as received: aiohttp's router would have normalized it its own way.
        try:
            handler, params = judge(routes, request.method, request.raw_path)
        except Refused as r:
            kind = {404: 'not_found_error', 405: 'method_not_allowed_error'}.get(r.status, 'invalid_request_error')
            raise ApiError(r.status, kind, r.reason, headers={'Allow': ', '.join(r.allow)} if r.allow else None)
        return await handler(request, params)

    sweep_deletions(engine.root)
    app = web.Application(middlewares=[shown, errors, auth])
    app.router.add_route('*', '/{tail:.*}', dispatch)
    return app
