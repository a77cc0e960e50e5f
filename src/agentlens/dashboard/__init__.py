"""The web dashboard served by ``agentlens serve`` at ``/`` (see docs/dashboard.md).

Server-rendered pages (Jinja2, autoescaped) with a small script and stylesheet served from
``/static``: the runs table and the per-role summary, one run with each ungrounded claim
highlighted in place, the review queue (keyboard-driven), a content item's flags, and trends.

The server mounts it with :func:`mount_dashboard`, handing it its store, key checker and
project views (:class:`Access`): the dashboard never imports the server.
"""

from agentlens.dashboard._access import Access, Viewer
from agentlens.dashboard._pages import mount_dashboard
from agentlens.dashboard._render import CSP

__all__ = ["CSP", "Access", "Viewer", "mount_dashboard"]
