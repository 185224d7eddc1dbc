"""Streaming record pipelines: map, filter, flat_map, batch, dedupe and take stages."""


class StageError(Exception):
    """A stage failed on a record (``on_error="raise"``); the original exception is ``__cause__``."""

    def __init__(self, stage, record, cause):
        super().__init__(f"stage {stage!r} failed on {record!r}: {cause!r}")
        self.stage = stage
        self.record = record
        self.cause = cause


class Pipeline:
    def __init__(self, source=None, on_error="raise"):
        raise NotImplementedError
