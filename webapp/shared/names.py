"""A queue's name as the pages show it: on a phone a long name (payments_settlement.eu-west-1) wraps after
its separators, never mid-word; a part still wider than its box is cut with an ellipsis, and the whole name
is in the tooltip (static/console.css, .qname)."""

from __future__ import annotations

import re

from markupsafe import Markup, escape

# a soft wrap opportunity after each separator a queue name is made of
_SEPARATOR = re.compile(r"([-_.:/])")


def qname(name: str | None) -> Markup:
    """`name` in a span that wraps only after its separators (<wbr>), with the whole name as its title."""
    text = str(name or "")
    parts = [str(escape(part)) + ("<wbr>" if _SEPARATOR.fullmatch(part) else "") for part in _SEPARATOR.split(text)]
    return Markup('<span class="qname" title="{}">{}</span>').format(text, Markup("".join(parts)))
