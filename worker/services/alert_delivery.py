"""Delivery of alert messages through Apprise: one library, every destination (Slack, e-mail, Teams, webhooks ...).

Apprise is an optional dependency (`pip install 'skiplock[alerts]'`), imported only where SKIPLOCK_ALERT_URLS
is set. A destination that fails does not stop the others; the failure is returned, logged and shown on
the console's Health page.
"""

from __future__ import annotations

import logging
from typing import Any

from skiplock.core.errors import ConfigError

log = logging.getLogger("skiplock.alerts")


def apprise_for(urls: str) -> Any:
    """An Apprise object holding every URL of `urls`; a URL Apprise cannot use is one ConfigError line."""
    try:
        import apprise
    except ImportError:
        raise ConfigError("SKIPLOCK_ALERT_URLS is set, but Apprise is not installed: "
                          "pip install 'skiplock[alerts]' (or apprise)") from None
    notifier = apprise.Apprise()
    for url in urls.split():
        if not notifier.add(url):
            shown = url.split("://", 1)[0] + "://..." if "://" in url else url[:20]
            raise ConfigError(f"SKIPLOCK_ALERT_URLS: Apprise cannot use {shown!r} (see Apprise's list of URLs)")
    return notifier


def deliver(notifier: Any, title: str, body: str) -> str | None:
    """Send one message to every destination; None when all took it, else why not (for the record)."""
    try:
        delivered = notifier.notify(title=title, body=body)
    except Exception as exc:  # a plugin's own error must not stop the alert pass
        log.warning("alert %r not delivered: %s", title, exc)
        return f"{type(exc).__name__}: {exc}"
    if not delivered:
        log.warning("alert %r not delivered to every destination (Apprise logs which)", title)
        return "not delivered to every destination (the worker's log says which)"
    return None
