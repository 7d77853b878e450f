"""The error shape of the embedded engine (src/engines/prefill/api-error.ts):
{"error": {"message", "type", "param"?}} with the status that says why."""
from typing import Dict, Optional


class ApiError(Exception):
    def __init__(self, status: int, kind: str, message: str, param: Optional[str] = None, headers: Optional[Dict[str, str]] = None):
        super().__init__(message)
        self.status, self.kind, self.message, self.param, self.headers = status, kind, message, param, headers or {}

    def body(self) -> dict:
        err = {'message': self.message, 'type': self.kind}
        if self.param is not None:
            err['param'] = self.param
        return {'error': err}


def bad_request(message: str, param: Optional[str] = None) -> ApiError:
    return ApiError(400, 'invalid_request_error', message, param)
