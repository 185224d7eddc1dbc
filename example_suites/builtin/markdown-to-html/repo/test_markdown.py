from markdown import to_html


def test_heading():
    assert to_html("# Title") == "<h1>Title</h1>"


def test_paragraphs():
    assert to_html("one\ntwo\n\nthree") == "<p>one two</p>\n<p>three</p>"


def test_emphasis():
    assert to_html("**bold** and *it*") == "<p><strong>bold</strong> and <em>it</em></p>"
