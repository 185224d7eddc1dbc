from inventory import config


def test_port():
    assert config.PORT == 8123
