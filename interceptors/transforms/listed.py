"""What the upstream said its resources are called: the URIs of `resources/list` and the templates of
`resources/templates/list`, so the request guard can tell a URI the server gave out from one a client made up.

A URI's path segment that is one random token of a credential's alphabet is a secret when nobody named it (a key
pasted into an address): the guard refuses it in the channels that carry no documents. A URI the upstream listed
is its own id, and a URI its template spells names its parts (`notes://n/{path}`, `gdrive:///{fileId}`): each
part is judged under that name as a tool argument of that name would be (`fileId` is opaque, `query` is not).
Templates are read as RFC 6570 expressions; an expression that cannot be read makes its template unused.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

MAX_URIS = 4096
MAX_TEMPLATES = 256
MAX_TEMPLATE_CHARS = 512
MAX_URI_CHARS = 8192

_EXPRESSION = re.compile(r"\{([+#./;?&]?)([A-Za-z0-9_.%,*:]{1,128})\}")
_VALUE_BY_OPERATOR = {
    "": r"[^/?#]*",
    "+": r"[^?#]*",
    "#": r"#.*",
    ".": r"(?:\.[^/?#]*)*",
    "/": r"(?:/[^?#]*)*",
    ";": r"(?:;[^/?#]*)*",
    "?": r"(?:\?[^#]*)?",
    "&": r"(?:&[^#]*)*",
}
QUERY_OPERATORS = frozenset({"?", "&", ";"})
"""Expressions whose text carries its members' names (`?q=…&limit=…`): judged as a nameless text, each query
member under its own name."""


def template_pattern(template: str) -> tuple[re.Pattern[str], tuple[str | None, ...]] | None:
    """A pattern matching the URIs `template` spells, and for each of its groups the name the part is judged under
    (None: a query-like expression whose text names its members). None when the template cannot be read."""
    if not template or len(template) > MAX_TEMPLATE_CHARS or "{" not in template:
        return None
    parts: list[str] = []
    names: list[str | None] = []
    at = 0
    for match in _EXPRESSION.finditer(template):
        literal = template[at : match.start()]
        if "{" in literal or "}" in literal:
            return None
        parts.append(re.escape(literal))
        operator, variables = match.group(1), match.group(2)
        first = variables.split(",", 1)[0].split(":", 1)[0].rstrip("*")
        parts.append(f"({_VALUE_BY_OPERATOR[operator]})")
        names.append(None if operator in QUERY_OPERATORS else first or None)
        at = match.end()
    tail = template[at:]
    if "{" in tail or "}" in tail or not names:
        return None
    parts.append(re.escape(tail))
    return re.compile("".join(parts), re.DOTALL), tuple(names)


class ListedResources:
    """The URIs and URI templates the upstream listed, bounded (oldest forgotten first); safe across threads.

    `parts(uri)`: `()` for a URI listed as it is, `((name, text), …)` for one a template spells (its parts, each
    with the name it is judged under), None for a URI the upstream never named."""

    def __init__(self, uris: int = MAX_URIS, templates: int = MAX_TEMPLATES) -> None:
        self.max_uris = uris
        self.max_templates = templates
        self.uris: OrderedDict[str, None] = OrderedDict()
        self.templates: OrderedDict[str, tuple[re.Pattern[str], tuple[str | None, ...]]] = OrderedDict()
        self.lock = threading.Lock()

    def learn(self, event: str, result: Any) -> None:
        """Remember what a `resources/list` or `resources/templates/list` result names (anything else: nothing)."""
        if not isinstance(result, Mapping):
            return
        if event == "resources/list":
            items, member = result.get("resources"), "uri"
        elif event == "resources/templates/list":
            items, member = result.get("resourceTemplates"), "uriTemplate"
        else:
            return
        if not isinstance(items, list):
            return
        names = [item.get(member) for item in items if isinstance(item, Mapping)]
        texts = [name for name in names if isinstance(name, str) and name]
        with self.lock:
            if member == "uri":
                for uri in texts:
                    if len(uri) <= MAX_URI_CHARS:
                        self.uris[uri] = None
                        self.uris.move_to_end(uri)
                while len(self.uris) > self.max_uris:
                    self.uris.popitem(last=False)
                return
        for template in texts:
            with self.lock:
                if template in self.templates:
                    self.templates.move_to_end(template)
                    continue
            compiled = template_pattern(template)
            if compiled is None:
                continue
            with self.lock:
                self.templates[template] = compiled
                while len(self.templates) > self.max_templates:
                    self.templates.popitem(last=False)

    def parts(self, uri: str) -> tuple[tuple[str | None, str], ...] | None:
        with self.lock:
            if uri in self.uris:
                return ()
            templates = list(self.templates.values())
        if len(uri) > MAX_URI_CHARS:
            return None
        for pattern, names in templates:
            match = pattern.fullmatch(uri)
            if match is not None:
                return tuple((name, text) for name, text in zip(names, match.groups(), strict=True) if text)
        return None
