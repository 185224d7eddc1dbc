from pipeline import Pipeline


def test_map_filter():
    p = Pipeline(range(10)).map(lambda x: x * x).filter(lambda x: x % 2 == 0)
    assert p.run() == [0, 4, 16, 36, 64]


def test_batch():
    assert Pipeline(range(5)).batch(2).run() == [[0, 1], [2, 3], [4]]
