from bst import BST


def test_insert_and_iterate():
    t = BST()
    for k in (5, 2, 8, 1):
        t.insert(k, str(k))
    assert list(t) == [1, 2, 5, 8]
    assert len(t) == 4
    assert t.get(8) == "8"


def test_delete():
    t = BST()
    for k in (5, 2, 8):
        t.insert(k)
    t.delete(5)
    assert list(t) == [2, 8]
