"""MyST Markdown as plain Markdown, readable outside the book (Jupyter, Colab, GitHub).

The chapters' Markdown uses roles and directives that only the book renders. :func:`render`
replaces them with what the book shows, as described by a :class:`Book`:

- ``{cite:t}`a,b``` becomes "Vaswani et al. (2017) and Devlin et al. (2019)", ``{cite}`` and
  ``{cite:p}`` "(Vaswani et al., 2017; Devlin et al., 2019)"; the keys cited are collected
  (:attr:`Book.cited`) for a reference list;
- ``{glue:text}`name:fmt``` (and ``{glue}``) becomes the glued value formatted as myst-nb formats
  it, or, when no executed chapter holds it, a link "(see the book)" to the page;
- ``{numref}``, ``{ref}`` and ``{doc}`` become links to the book's page with the text the book
  shows ("Fig. 8.3", the page's title); ``{math}`` becomes ``$...$``; any other role its text;
- directives (```` ```{name} ```` or ``:::{name}`` fences): an admonition (``admonition``, ``note``,
  ``tip``...) becomes a quote under its title, or a ``<details>`` block with ``:class: dropdown``;
  ``math`` a ``$$`` block; ``figure`` and ``image`` an image with its caption; ``code-block`` a
  plain fence; any other a quote of its body;
- ``(label)=`` targets and ``%`` comment lines are dropped, and the label of ``$$ ... $$ (label)``.

Ordinary code fences and inline code are left alone.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Callable

ROLE = re.compile(r"\{(?P<name>[a-zA-Z][\w:+-]*)\}`(?P<content>[^`]+)`")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,}|:{3,})(?P<info>.*)$")
DIRECTIVE = re.compile(r"^\{(?P<name>[\w:.-]+)\}\s*(?P<argument>.*)$")
TARGET = re.compile(r"^\s*\([\w:.-]+\)=\s*$")
COMMENT = re.compile(r"^\s*%")
EQUATION_LABEL = re.compile(r"^(\s*\$\$)\s*\([\w:.-]+\)\s*$")
EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.DOTALL)
ADMONITIONS = {"admonition": "", "note": "Note", "tip": "Tip", "hint": "Hint", "important": "Important",
               "warning": "Warning", "caution": "Caution", "attention": "Attention", "danger": "Danger",
               "error": "Error", "seealso": "See also", "margin": "", "sidebar": "", "topic": "", "epigraph": ""}
SEE_THE_BOOK = "(see the book)"


@dataclass
class Book:
    """What the book shows for the references of one page (``docname``), to render its Markdown alike."""

    docname: str  # the page whose Markdown is rendered, e.g. "chapters/ch08_bert"
    page_url: Callable[[str], str]  # a docname's page in the built book
    references: dict  # citation key -> citations.Reference
    glued: dict | None = None  # glue name -> its text/plain output in the executed page; None: not executed
    targets: dict = field(default_factory=dict)  # label -> (docname, numbered text "Fig. 8.3", title)
    title: Callable[[str], str] = lambda docname: docname  # a page's title
    cited: list = field(default_factory=list)  # the keys cited so far, in order of first citation

    def link(self, text: str, docname: str, anchor: str = "") -> str:
        """A Markdown link to ``docname``'s page in the book (at ``anchor``)."""
        return f"[{text}]({self.page_url(docname)}{'#' + anchor if anchor else ''})"


def _explicit(content: str) -> tuple[str, str]:
    """``("text", "target")`` of ``text <target>``, or ``("", content)``."""
    match = EXPLICIT.match(content.strip())
    return (match["text"].strip(), match["target"].strip()) if match else ("", content.strip())


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _cite(name: str, content: str, book: Book) -> str:
    keys = [key.strip() for key in content.split(",") if key.strip()]
    references = []
    for key in keys:
        if key not in book.references:
            raise KeyError(f"{book.docname}: citation key {key!r} is not in the bibliography")
        if key not in book.cited:
            book.cited.append(key)
        references.append(book.references[key])
    style = name.split(":", 1)[1] if ":" in name else "p"
    if style.startswith("t") or style in ("ct", "ts"):
        return _join([r.textual for r in references])
    return "(" + "; ".join(r.parenthetical for r in references) + ")"


def _glue(content: str, book: Book) -> str:
    from myst_nb.core.variables import format_plain_text

    key, _, fmt = content.strip().rpartition(":") if ":" in content else ("", "", "")
    key = key or content.strip()
    if "::" in key or book.glued is None or key not in book.glued:
        return book.link(SEE_THE_BOOK, book.docname)
    return format_plain_text(book.glued[key], fmt or "s")


def _reference(name: str, content: str, book: Book) -> str:
    text, target = _explicit(content)
    if name == "doc":
        base = "" if target.startswith("/") else posixpath.dirname(book.docname)
        docname = posixpath.normpath(posixpath.join(base, target.lstrip("/")))
        return book.link(text or book.title(docname), docname)
    label = target.lower()
    if label not in book.targets:
        return book.link(text or target, book.docname, target)
    docname, numbered, title = book.targets[label]
    if name == "numref":
        number = numbered.rsplit(" ", 1)[-1]
        shown = text.replace("%s", number).replace("{number}", number) if text else numbered
    else:
        shown = text or title or numbered
    return book.link(shown, docname, label)


def render_roles(text: str, book: Book) -> str:
    """``text`` (one paragraph or more, no code fence) with every MyST role replaced; inline code kept."""

    def role(match: re.Match) -> str:
        name, content = match["name"], match["content"]
        if name == "cite" or name.startswith("cite:"):
            return _cite(name, content, book)
        if name in ("glue", "glue:text", "glue:", "glue:any"):
            return _glue(content, book)
        if name in ("numref", "ref", "doc", "std:ref", "std:doc"):
            return _reference(name.removeprefix("std:"), content, book)
        if name in ("math", "eq"):
            return f"${content}$" if name == "math" else content
        return _explicit(content)[0] or _explicit(content)[1]

    out, at = [], 0
    for code in INLINE_CODE.finditer(text):
        start = code.start()
        if start > 0 and text[start - 1] == "}" and ROLE.match(text, text.rfind("{", 0, start)):
            continue  # the backticks of a role, not inline code
        out += [ROLE.sub(role, text[at:start]), code.group(0)]
        at = code.end()
    out.append(ROLE.sub(role, text[at:]))
    return "".join(out)


def _closing(lines: list[str], start: int, fence: str) -> int:
    """The index of the line that closes ``fence`` opened before ``start`` (``len(lines)`` if none)."""
    char = re.escape(fence[0])
    closing = re.compile(rf"^[ \t]*{char}{{{len(fence)},}}\s*$")
    for index in range(start, len(lines)):
        if closing.match(lines[index]):
            return index
    return len(lines)


def _options(body: list[str]) -> tuple[dict, list[str]]:
    """A directive's options (``:key: value`` lines or a ``---`` YAML block) and the rest of its body."""
    options = {}
    if body and body[0].strip() == "---":
        import yaml

        end = next((i for i in range(1, len(body)) if body[i].strip() == "---"), None)
        if end is not None:
            options = yaml.safe_load("\n".join(body[1:end])) or {}
            return options, body[end + 1:]
    while body and re.match(r"^\s*:[\w-]+:", body[0]):
        key, _, value = body[0].strip()[1:].partition(":")
        options[key] = value.strip()
        body = body[1:]
    return options, body


def _quote(lines: list[str]) -> list[str]:
    return [f"> {line}" if line.strip() else ">" for line in lines]


def _directive(name: str, argument: str, body: list[str], book: Book) -> list[str]:
    options, body = _options(body)
    content = render(("\n".join(body)).strip("\n"), book).splitlines() if body else []
    if name in ADMONITIONS:
        title = render_roles(argument.strip(), book) or ADMONITIONS[name]
        if "dropdown" in str(options.get("class", "")).split():
            return [f"<details><summary>{title or 'Details'}</summary>", "", *content, "", "</details>"]
        return _quote(([f"**{title}**", ""] if title else []) + content)
    if name == "math":
        return ["$$", *body, "$$"] if body else []
    if name in ("figure", "image"):
        alt = options.get("alt", "")
        caption = " ".join(line.strip() for line in content)
        return [f"![{alt}]({argument.strip()})"] + (["", f"*{caption}*"] if caption else [])
    if name in ("code-block", "code", "sourcecode"):
        return [f"```{argument.strip()}", *body, "```"]
    return _quote(content) if content else []


def render(text: str, book: Book) -> str:
    """The MyST Markdown ``text`` of ``book.docname`` as plain Markdown (see the module's docstring)."""
    lines, out, index, paragraph = text.splitlines(), [], 0, []

    def flush():
        if paragraph:
            out.extend(render_roles("\n".join(paragraph), book).split("\n"))
            paragraph.clear()

    while index < len(lines):
        line = lines[index]
        fence = FENCE.match(line)
        if fence:
            flush()
            end = _closing(lines, index + 1, fence["fence"])
            directive = DIRECTIVE.match(fence["info"].strip())
            if directive:
                indent = fence["indent"]
                body = [l[len(indent):] if l.startswith(indent) else l.lstrip() for l in lines[index + 1:end]]
                rendered = _directive(directive["name"], directive["argument"], body, book)
                out += [indent + l if l else "" for l in rendered]
            else:
                out += lines[index:end + 1]  # an ordinary code fence: as it is
            index = end + 1
            continue
        if TARGET.match(line) or COMMENT.match(line):
            index += 1
            continue
        label = EQUATION_LABEL.match(line)
        paragraph.append(label.group(1) if label else line)
        index += 1
    flush()
    return "\n".join(out)
