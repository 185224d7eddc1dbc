"""A JSON REST API client with retries, backoff and pagination (standard library only)."""

import time


class ApiError(Exception):
    """A request failed: ``status`` is the HTTP status (None when no response came), ``message`` why."""

    def __init__(self, status, message):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class ApiClient:
    def __init__(self, base_url, token=None, retries=3, backoff=0.5, timeout=10.0, sleep=time.sleep):
        raise NotImplementedError

    def get(self, path, params=None):
        raise NotImplementedError

    def post(self, path, data):
        raise NotImplementedError

    def delete(self, path):
        raise NotImplementedError

    def paginate(self, path, params=None):
        raise NotImplementedError
