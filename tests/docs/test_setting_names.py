"""Every SKIPLOCK_* variable the docs name is one skiplock accepts: an unknown SKIPLOCK_ variable stops
every process at start-up (skiplock.core.plumbing.config), so a page naming one sends its reader there."""

from __future__ import annotations

import re

from skiplock.core.plumbing import config
from tests.docs.examples import pages

NAME = re.compile(r"(settings\.|config\[[\"'])?\b(SKIPLOCK_[A-Z0-9_]*[A-Z0-9])\b")
# Named on purpose, each with why
NOT_SETTINGS = {
    "SKIPLOCK_CONCURENCY": "the typo the settings page shows being refused",
    "SKIPLOCK_SIGNAL_RETENTION": "a setting of the durable jobs design page, for a feature not built yet",
}


def test_every_skiplock_variable_in_the_docs_is_accepted() -> None:
    known = set(config._PARSERS) | config._KNOWN_ELSEWHERE
    unknown = []
    for page in pages():
        for match in NAME.finditer(page.read_text()):
            framework_setting, name = match.groups()  # settings.SKIPLOCK_X is Django's, not the environment's
            if framework_setting is None and name not in known and name not in NOT_SETTINGS:
                unknown.append(f"{page.name}: {name}")
    assert unknown == []
