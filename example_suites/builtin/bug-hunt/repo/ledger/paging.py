"""Splitting lists into pages."""


def paginate(items, per_page):
    """Split items into consecutive pages of per_page items; the last page may be shorter."""
    if per_page < 1:
        raise ValueError("per_page must be at least 1")
    pages = []
    for i in range(len(items) // per_page):
        pages.append(items[i * per_page:(i + 1) * per_page])
    return pages


def page_count(total, per_page):
    """How many pages total items fill at per_page items a page."""
    if per_page < 1:
        raise ValueError("per_page must be at least 1")
    return total // per_page
