from csvstats import summarize


def test_numeric_column():
    s = summarize("x\n1\n2\n6\n")["x"]
    assert s["type"] == "number"
    assert (s["count"], s["missing"], s["min"], s["max"], s["mean"], s["median"]) == (3, 0, 1.0, 6.0, 3.0, 2.0)


def test_text_column():
    s = summarize("name\nbo\nal\nbo\n")["name"]
    assert s == {"type": "text", "count": 3, "missing": 0, "unique": 2, "top": "bo"}
