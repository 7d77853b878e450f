"""The whole request body, up to a limit. A stream's read(n) returns what has arrived, up to n
bytes, not n bytes: one read took the first 64 KiB of a 32K-token submit on the H200 and the
request was refused as "not JSON" (a 16K one had arrived in one piece). Read until the end."""
from .api_error import ApiError


async def read_body(stream, limit: int) -> bytes:
    """Every byte up to the end of `stream` (anything with asyncio's `read(n)`); 413 past `limit`."""
    parts, size = [], 0
    while True:
        part = await stream.read(limit + 1 - size)
        if not part:
            return b''.join(parts)
        parts.append(part)
        size += len(part)
        if size > limit:
            raise ApiError(413, 'request_too_large_error', f'the body is over {limit} bytes')
