import sqlite3

from . import config


def items():
    db = sqlite3.connect(config.DATABASE_URL.removeprefix("sqlite:///"))
    return db.execute("select name from items").fetchall()
