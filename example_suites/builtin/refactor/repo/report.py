"""Stock report. Legacy code: it works, but nobody dares to change it."""

import json

_last = {}


def generate_report(rows, fmt="text"):
    # rows: dicts with sku, name, category, qty, price (strings, as read from a CSV file)
    global _last
    cats = {}
    total = 0.0
    low = []
    items = []
    for r in rows:
        sku = r["sku"].strip()
        name = r["name"].strip()
        cat = r.get("category", "").strip() or "uncategorized"
        qty = int(r["qty"])
        price = float(r["price"])
        if qty < 0:
            raise ValueError("negative quantity for " + sku)
        value = qty * price
        total = total + value
        if cat in cats:
            cats[cat] = cats[cat] + value
        else:
            cats[cat] = value
        if qty < 5:
            low.append(sku)
        items.append((sku, name, cat, qty, price, value))
    if fmt == "text":
        out = "STOCK REPORT\n"
        out = out + "============\n"
        for c in sorted(cats):
            out = out + c.ljust(20) + ("%.2f" % cats[c]).rjust(12) + "\n"
        out = out + "-" * 32 + "\n"
        out = out + "TOTAL".ljust(20) + ("%.2f" % total).rjust(12) + "\n"
        if len(low) > 0:
            out = out + "LOW STOCK: " + ", ".join(sorted(low)) + "\n"
        else:
            out = out + "LOW STOCK: none\n"
        _last = {"fmt": fmt, "out": out}
        return out
    elif fmt == "csv":
        out = "category,value\n"
        for c in sorted(cats):
            out = out + c + "," + ("%.2f" % cats[c]) + "\n"
        out = out + "TOTAL," + ("%.2f" % total) + "\n"
        _last = {"fmt": fmt, "out": out}
        return out
    elif fmt == "json":
        d = {}
        d["categories"] = {}
        for c in sorted(cats):
            d["categories"][c] = round(cats[c], 2)
        d["total"] = round(total, 2)
        d["low_stock"] = sorted(low)
        d["items"] = len(items)
        out = json.dumps(d, indent=2, sort_keys=True)
        _last = {"fmt": fmt, "out": out}
        return out
    else:
        raise ValueError("unknown format: " + str(fmt))
