"""README.md is the front door: short, the two commands exactly as CI runs them, links a package index
can follow (absolute, into the docs site), and each thing a newcomer looks for one click away."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.docs.examples import REPO

README = (REPO / "README.md").read_text()
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _site_url() -> str:
    # mkdocs.yml names python tags (!!python/name) in some setups; this one has none, so safe_load reads it
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    return str(config["site_url"])


def test_readme_is_short_and_keeps_the_two_commands() -> None:
    assert len(README.splitlines()) <= 260
    assert "pip install -e '.[dev]' && skiplock dev" in README
    command = "pip install -e '.[test]' && python -m pytest"
    assert command in README
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == command  # CI ends with the README's test command, word for word


def _target(url: str) -> str:
    """The docs source file an absolute site URL points at (page or static file)."""
    path = url.removeprefix(_site_url()).split("#")[0]
    if not path or path.endswith("/"):
        stem = path.rstrip("/") or "index"
        return f"docs/{stem}.md" if (REPO / f"docs/{stem}.md").exists() else f"docs/{stem}/index.md"
    if path.startswith("benchmarks/results/"):
        return "tests/" + path
    return "docs/" + path


def test_every_readme_link_is_absolute_and_lands_on_a_page_of_the_site() -> None:
    links = LINK.findall(README)
    assert len(links) >= 10
    site = _site_url()
    for url in links:
        assert url.startswith(("https://", "http://", "#")), f"relative link {url!r}: a package index cannot follow it"
        if url.startswith(site):
            assert (REPO / _target(url)).exists(), f"{url} -> {_target(url)} does not exist"


@pytest.mark.parametrize("page", ["tutorial/django/", "howto/mount-console/", "howto/recurring-jobs/",
                                  "howto/pgbouncer-and-ha/", "howto/why-not-running/", "benchmarks/"])
def test_what_a_newcomer_looks_for_is_one_click_from_the_readme(page: str) -> None:
    assert f"]({_site_url()}{page}" in README, f"README does not link {page}"


def test_the_screenshot_renders_on_a_package_index() -> None:
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)", README)
    assert images, "the README shows the console"
    for url in images:
        assert url.startswith(_site_url()) and (REPO / _target(url)).exists(), url


def test_the_readme_renders_as_the_package_index_renders_it() -> None:
    """PyPI renders README.md with readme_renderer (GitHub-flavoured Markdown, then its HTML cleaner):
    the tables survive, the screenshot keeps its absolute source, and every link still points somewhere."""
    from readme_renderer.markdown import render

    html = render(README, variant="GFM")
    assert html is not None
    assert html.count("<table>") == 2
    assert re.search(rf'<img src="{re.escape(_site_url())}img/overview.png"', html)
    hrefs = re.findall(r'href="([^"]+)"', html)
    assert len(hrefs) >= 10 and all(h.startswith(("https://", "http://", "#")) for h in hrefs), hrefs


def test_the_readmes_test_figures_are_the_testing_pages() -> None:
    """The connection budget and the suite's time in the README are the ones the suite enforces and the
    testing page measured: when either changes, the README has to follow."""
    from tests.support.connection_budget import BUDGET

    testing = (REPO / "docs" / "reference" / "testing-the-project.md").read_text()
    connections = re.search(r"\*\*Connections\.\*\* At most (\d+) at once", README)
    assert connections and int(connections.group(1)) == BUDGET
    assert f"## The connection budget: {BUDGET}" in testing
    minutes = re.search(r"\*\*Time\.\*\* About (\d+) minutes", README)
    measured = re.search(r"^\| `python -m pytest` \(4 xdist processes\) \|[^|]+\| (\d+):(\d\d) \|", testing, re.M)
    assert minutes and measured, "the README's time, and the testing page's full run"
    assert int(minutes.group(1)) == round(int(measured.group(1)) + int(measured.group(2)) / 60)
