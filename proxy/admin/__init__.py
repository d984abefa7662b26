"""The admin API, served by uvicorn on the proxy's own event loop."""

from proxy.admin.app import create_app
from proxy.admin.server import AdminServer

__all__ = ["AdminServer", "create_app"]
