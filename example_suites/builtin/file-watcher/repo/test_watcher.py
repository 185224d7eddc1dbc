from watcher import Event, Watcher


def test_created_file(tmp_path):
    w = Watcher(tmp_path)
    (tmp_path / "a.txt").write_text("hi")
    assert w.poll() == [Event("created", "a.txt")]
    assert w.poll() == []


def test_deleted_file(tmp_path):
    (tmp_path / "a.txt").write_text("hi")
    w = Watcher(tmp_path)
    (tmp_path / "a.txt").unlink()
    assert w.poll() == [Event("deleted", "a.txt")]
