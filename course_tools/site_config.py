"""Where the course is published: the one site configuration, read from ``_config.yml``.

``html.baseurl`` is the book; ``repository.url`` / ``repository.branch`` are the
public repository, which holds the student-facing tree (:mod:`course_tools.book.public`).
The theme makes the launch buttons and the repository button from them; the wheel
URLs of the install cells (:mod:`course_tools.book.install_cells`) come from
:func:`read_site`. The wheels live at :data:`EDITIONS`, in the tree and in the
built book.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from course_tools.edition_names import wheel_name
from . import ROOT

EDITIONS = "_static/editions"  # where the wheels live, in the tree and in the built book


class PublicTreeError(RuntimeError):
    """The tree could not be written, or it holds something students must not see."""


@dataclass(frozen=True)
class Site:
    """Where the course is published, read from ``_config.yml``."""

    book_url: str  # html.baseurl, ending in "/"
    repository_url: str  # the public repository (holds the tree written here)
    branch: str

    @property
    def github(self) -> tuple[str, str]:
        """``(owner, name)`` of the public repository on GitHub."""
        match = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)/?", self.repository_url)
        if not match:
            raise PublicTreeError(f"repository.url must be a GitHub repository, got {self.repository_url!r}")
        return match.group(1), match.group(2)

    def page(self, docname: str) -> str:
        return f"{self.book_url}{docname}.html"

    def wheel_url(self, number: int, root: Path = ROOT) -> str:
        return f"{self.book_url}{EDITIONS}/{wheel_name(number, root)}"

    def colab_url(self, path: str) -> str:
        owner, name = self.github
        return f"https://colab.research.google.com/github/{owner}/{name}/blob/{self.branch}/{path}"

    def binder_url(self, path: str) -> str:
        owner, name = self.github
        return f"https://mybinder.org/v2/gh/{owner}/{name}/{self.branch}?urlpath=lab/tree/{path}"


def read_config(root: Path = ROOT) -> dict:
    import yaml

    return yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))


def read_site(root: Path = ROOT) -> Site:
    """The book's URL and the public repository, from ``_config.yml`` (the one place they are written)."""
    config = read_config(root)
    book_url = (config.get("html") or {}).get("baseurl") or ""
    repository = config.get("repository") or {}
    if not book_url.startswith("https://") or not repository.get("url"):
        raise PublicTreeError("_config.yml must set html.baseurl (https://...) and repository.url")
    site = Site(book_url.rstrip("/") + "/", repository["url"].rstrip("/"), repository.get("branch", "main"))
    site.github  # noqa: B018 (validates the repository URL)
    return site

