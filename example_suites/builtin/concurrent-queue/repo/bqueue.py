"""A bounded, closable, thread-safe FIFO queue."""


class Empty(Exception):
    """get() found nothing before its timeout."""


class Full(Exception):
    """put() found no room before its timeout."""


class Closed(Exception):
    """The queue is closed (and, for get, drained)."""


class BoundedQueue:
    def __init__(self, maxsize):
        raise NotImplementedError

    def put(self, item, timeout=None):
        raise NotImplementedError

    def get(self, timeout=None):
        raise NotImplementedError

    def close(self):
        raise NotImplementedError
