"""The console's keyboard shortcuts (static/keys.js): every page of a logged-in operator loads them and says
where the "g" keys lead, and every key the script knows is documented on the console how-to."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.conftest import REPO

GOTO = re.compile(r"data-goto='([^']+)'")


def test_each_page_loads_the_keys_and_names_where_g_leads(admin: Any, app: Any) -> None:
    for url in ("/", "/dead/", "/search/?queue=t1", "/health/"):
        html = admin.get(url).get_data(as_text=True)
        assert '<script src="/static/keys.js" defer></script>' in html
        match = GOTO.search(html)
        assert match, url
        assert json.loads(match.group(1)) == {"o": "/", "d": "/dead/", "r": "/recurring/", "w": "/workers/",
                                              "h": "/health/", "s": "/search/"}
    login_page = app.test_client().get("/login").get_data(as_text=True)
    assert "data-goto" not in login_page  # no destinations before a login
    assert admin.get("/static/keys.js").status_code == 200


def test_every_key_is_documented_on_the_console_page() -> None:
    script = (REPO / "static" / "keys.js").read_text()
    keys = re.findall(r'\["([^"]+)", "[^"]+"\]', script.split("var KEYS = [", 1)[1].split("];", 1)[0])
    assert {"/", "?", "g o", "g d", "g r", "g w", "g h", "j", "k", "x"} <= set(keys)
    doc = (REPO / "docs" / "howto" / "console.md").read_text()
    section = doc.split("## Keyboard", 1)[1].split("\n## ", 1)[0]
    for key in keys:
        assert f"`{key}`" in section, f"key {key!r} of static/keys.js is not on docs/howto/console.md"
