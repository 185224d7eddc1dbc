PORT = 8123
DATABASE_URL = "sqlite:///inventory.db"
PAGE_SIZE = 50
