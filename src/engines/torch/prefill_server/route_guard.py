"""The route guard every port here shares (src/http/route-guard.ts, docs/front-door.md), for the torch
prefill server: a raw request target is normalized once by RFC 3986 (percent-decoding, dot-segment
removal), spellings parsers read differently are refused with 400, and only the normalized path is
matched against the server's explicit allowlist (404 off it, 405 for another method). Standard
library only; suites/http/route-guard-cases.json holds the cases both implementations must agree on."""
import re

MAX_TARGET_LENGTH = 4096
_RAW_PATH_CHAR = re.compile(r"^[A-Za-z0-9\-._~!$&'()*+,;=:@/%]$")
_CANONICAL_CHAR = re.compile(r"^[A-Za-z0-9\-._~!$&'()*+,;=:@]$")
_HEX2 = re.compile(r'^[0-9A-Fa-f]{2}$')


class Refused(Exception):
    def __init__(self, status: int, reason: str, allow=None):
        super().__init__(reason)
        self.status, self.reason, self.allow = status, reason, allow


def _describe(c: str) -> str:
    code = ord(c)
    return f"'{c}'" if 0x21 <= code < 0x7f else f'U+{code:04X}'


def _decode_segment(raw: str) -> str:
    out = bytearray()
    i = 0
    while i < len(raw):
        c = raw[i]
        if c != '%':
            out += c.encode('latin-1')
            i += 1
            continue
        hx = raw[i + 1:i + 3]
        if not _HEX2.match(hx):
            raise Refused(400, f"a '%' not followed by two hex digits ({raw[i:i + 3]!r})")
        b = int(hx, 16)
        if b in (0x2f, 0x5c):
            raise Refused(400, f'an encoded slash (%{hx}) is refused: some parsers read it as a separator, some do not')
        if b == 0:
            raise Refused(400, 'an encoded NUL (%00) is refused')
        if b < 0x20 or b == 0x7f:
            raise Refused(400, f'an encoded control character (%{hx}) is refused')
        if b == 0x25:
            raise Refused(400, 'an encoded percent sign (%25) is refused: a second decoding would read another path')
        out.append(b)
        i += 3
    try:
        return out.decode('utf-8')
    except UnicodeDecodeError:
        raise Refused(400, 'percent-encoded bytes that are not UTF-8')


def encode_segment(segment: str) -> str:
    return ''.join(c if _CANONICAL_CHAR.match(c) else ''.join(f'%{b:02X}' for b in c.encode('utf-8')) for c in segment)


def normalize_target(raw: str):
    """(canonical path, decoded segments, query) for a raw target, or Refused (the rules of route-guard.ts)."""
    if len(raw) > MAX_TARGET_LENGTH:
        raise Refused(414, f'request target longer than {MAX_TARGET_LENGTH} characters')
    if not raw.startswith('/'):
        raise Refused(400, 'the request target must be a path starting with / (absolute URLs and * are refused)')
    raw_path, _, query = raw.partition('?')
    for c in raw_path:
        if c == '\\':
            raise Refused(400, 'a backslash is refused: some parsers read it as a path separator')
        if not _RAW_PATH_CHAR.match(c):
            raise Refused(400, f'the character {_describe(c)} is not allowed raw in a path')
    if raw_path == '/':
        return '/', [], query
    segments = []
    raws = raw_path[1:].split('/')
    for i, r in enumerate(raws):
        if r == '':
            raise Refused(400, 'an empty path segment (// or a trailing /) is refused')
        segment = _decode_segment(r)
        if segment in ('.', '..'):
            if segment == '..':
                if not segments:
                    raise Refused(400, 'a .. segment that climbs above the root is refused')
                segments.pop()
            if i == len(raws) - 1:
                raise Refused(400, 'a path ending in a dot segment ends in a slash once normalized, and trailing slashes are refused')
            continue
        segments.append(segment)
    if not segments:
        raise Refused(400, 'a path made only of dot segments is refused')
    return '/' + '/'.join(encode_segment(s) for s in segments), segments, query


def judge(routes, method: str, raw: str):
    """The route for `method raw` among routes [(methods, pattern, handler)] and its params, or Refused."""
    path, segments, _query = normalize_target(raw)
    allow = []
    for methods, pattern, handler in routes:
        parts = [] if pattern == '/' else pattern[1:].split('/')
        if len(parts) != len(segments):
            continue
        params = {}
        for p, s in zip(parts, segments):
            if p.startswith(':'):
                params[p[1:]] = s
            elif p != s:
                break
        else:
            if method in methods:
                return handler, params
            allow += [m for m in methods if m not in allow]
    if allow:
        raise Refused(405, f"{method} is not allowed on {path}; allowed: {', '.join(allow)}", allow)
    raise Refused(404, f'no route {method} {path}')
