import threading

from bqueue import BoundedQueue


def test_fifo():
    q = BoundedQueue(3)
    for i in range(3):
        q.put(i)
    assert [q.get() for _ in range(3)] == [0, 1, 2]


def test_consumer_thread():
    q = BoundedQueue(2)
    got = []
    t = threading.Thread(target=lambda: got.extend(q.get() for _ in range(5)))
    t.start()
    for i in range(5):
        q.put(i)
    t.join(30)
    assert got == [0, 1, 2, 3, 4]
