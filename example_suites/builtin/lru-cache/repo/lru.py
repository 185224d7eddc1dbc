"""A thread-safe LRU cache with expiry and single-flight loading."""

import time


class LRUCache:
    def __init__(self, capacity, ttl=None, clock=time.monotonic, on_evict=None):
        raise NotImplementedError
