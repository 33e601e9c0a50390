"""The README and the docs/ pages link only to what exists: every relative link (a Markdown link, an image or a
reference definition) names a file or folder of the repository, and an anchor after '#' names a heading of the page
it points at, slugged as the forge slugs it. External links (any URL with a scheme: http, https, mailto) are not
followed, and nothing inside fenced code or an inline code span is a link. Every docs page opens with a link back to
the README and is listed in docs/README.md."""

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target "title") and ![alt](target): link text may hold one level of brackets
_INLINE = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s)]+)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"
)
_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def outside_fences(text):
    """The lines of a Markdown text outside fenced code."""
    inside = False
    for line in text.splitlines():
        if _FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield line


def prose_lines(text):
    """The lines of a Markdown text outside fenced code, with inline code spans blanked out."""
    for line in outside_fences(text):
        yield _CODE_SPAN.sub("", line)


def links(text):
    """Every link target in a Markdown text: inline links, images and reference definitions, in order."""
    found = []
    for line in prose_lines(text):
        for match in _DEFINITION.finditer(line):
            found.append(match.group(1).strip("<>"))
        for match in _INLINE.finditer(line):
            found.append(match.group(1).strip("<>"))
    return found


def relative_links(text):
    """The link targets a reader follows inside the repository: no scheme (http, https, mailto, ...)."""
    return [target for target in links(text) if not _SCHEME.match(target)]


def slug(heading):
    """A heading's anchor as the forge makes it: formatting and punctuation dropped, lower case, spaces to dashes."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.replace("`", "").replace("*", "")
    text = unicodedata.normalize("NFC", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text):
    """Every anchor a Markdown text's headings give, a repeated heading numbered -1, -2, ... as the forge does."""
    seen = {}
    result = set()
    for line in outside_fences(text):
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def resolve(page, target):
    """The file a relative link on `page` points at, and its anchor ('' when none)."""
    path, _, anchor = target.partition("#")
    path = unquote(path)
    if not path:
        return page, anchor
    base = ROOT if path.startswith("/") else page.parent
    return (base / path.lstrip("/")).resolve(), anchor


def _name(page):
    return str(page.relative_to(ROOT))


def test_a_link_image_or_reference_definition_is_found_and_code_is_not_a_link():
    text = (
        "See [the config](../config/README.md) and ![a figure](figures/a.png 'x').\n"
        '[a [nested] text](b.md "title") and `[not](a-link.md)`\n'
        "```\n[also not](code.md)\n```\n"
        "[ref]: <c d.md>\n"
    )
    assert links(text) == ["../config/README.md", "figures/a.png", "b.md", "c d.md"]


def test_external_links_are_not_followed():
    text = "[web](https://example.org/x) [plain](http://example.org) [mail](mailto:a@b.c) [here](gpu.md#x)"
    assert relative_links(text) == ["gpu.md#x"]


def test_a_heading_anchor_is_slugged_as_the_forge_slugs_it():
    text = "# Factorial designs: model size, precision\n## `config/scaling.yaml` figures\n## Notes\n## Notes\n"
    assert anchors(text) == {
        "factorial-designs-model-size-precision",
        "configscalingyaml-figures",
        "notes",
        "notes-1",
    }


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_relative_link_points_at_a_file_that_exists(page):
    missing = [target for target in relative_links(page.read_text()) if not resolve(page, target)[0].exists()]
    assert not missing, f"{_name(page)} links to what does not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_anchor_names_a_heading_of_the_page_it_points_at(page):
    wrong = []
    for target in relative_links(page.read_text()):
        path, anchor = resolve(page, target)
        if anchor and path.suffix == ".md" and path.is_file() and anchor not in anchors(path.read_text()):
            wrong.append(target)
    assert not wrong, f"{_name(page)} links to headings that do not exist: {wrong}"


def test_every_docs_page_is_listed_in_the_docs_index():
    listed = {resolve(DOCS / "README.md", target)[0] for target in relative_links((DOCS / "README.md").read_text())}
    unlisted = [_name(page) for page in DOCS.glob("*.md") if page.name != "README.md" and page.resolve() not in listed]
    assert not unlisted, f"docs/README.md does not list {unlisted}"


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=_name)
def test_every_docs_page_opens_with_a_link_back_to_the_readme(page):
    opening = page.read_text().split("\n\n")[:2]
    assert any("](../README.md)" in paragraph for paragraph in opening), f"{_name(page)} has no link to the README"
