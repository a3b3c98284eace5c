"""The console inside web apps that are not Flask: Django (`django.py`) and Starlette/FastAPI (`asgi.py`).

Each module imports its framework lazily, so skiplock itself never needs Django or Starlette. Both
build the console with `hosted.hosted_console()` and hand it the host's verdict on each request.
"""
