"""The admin API, served by uvicorn on the proxy's own event loop."""

from freezeframe.proxy.admin.app import create_app
from freezeframe.proxy.admin.server import AdminServer

__all__ = ["AdminServer", "create_app"]
