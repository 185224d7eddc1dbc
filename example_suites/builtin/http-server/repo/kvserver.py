"""An HTTP key-value store."""


def make_server(port=0, host="127.0.0.1"):
    """Return a server bound to (host, port), ready for serve_forever()."""
    raise NotImplementedError
