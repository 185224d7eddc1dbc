from .api import serve

serve()
