from . import config, store


def serve():
    """Serve the JSON API on config.PORT."""
    print(f"serving on {config.PORT}")


def list_items(page=0):
    return store.items()[page * config.PAGE_SIZE:(page + 1) * config.PAGE_SIZE]
