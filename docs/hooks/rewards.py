"""The reward library table of ``docs/rewards.md``: written between its two markers by ``python docs/hooks/rewards.py``,
and again at every docs build (this file is also the MkDocs hook that does it).

One row per built-in reward of ``grpo_ext.rewards.REGISTRY``: its name, the first paragraph of its docstring (whose
first line ``grpo-ext rewards ls`` shows), its arguments with their types and defaults (those ``grpo-ext rewards
show`` lists), and the range of its scores as the reward declares it (``score_range``, ``grpo_ext/rewards/api.py``),
read off the reward built from its defaults (and ``registry.EXAMPLES`` for the arguments it requires). The page is
committed with the table in it, so that a reader of the checkout sees it; ``tests/unit/test_docs.py`` fails while
the table differs from what ``render_table()`` writes (rerun this script after adding or changing a reward). Needs
neither MkDocs nor torch.
"""

import inspect
import re
from pathlib import Path

PAGE = "rewards.md"
START = (
    "<!-- the reward table: written from the registry by `python docs/hooks/rewards.py`; "
    "change a reward's docstring or signature, not the table -->"
)
END = "<!-- end of the reward table -->"


def _cell(text: str) -> str:
    r"""Text safe in a Markdown table cell: docstring ``code`` as Markdown `code`; outside code, ``|`` escaped and
    ``<`` written as an entity, so that neither splits the cell nor starts HTML (a pipe in code stays as it is:
    GitHub and MkDocs read an escape there differently, and no first line or default holds one).

    >>> _cell("``<think>`` blocks | x < y")
    '`<think>` blocks \\| x &lt; y'
    """
    parts = " ".join(str(text).split()).replace("``", "`").split("`")
    return "`".join(part if i % 2 else part.replace("|", "\\|").replace("<", "&lt;") for i, part in enumerate(parts))


def _arg(p: inspect.Parameter) -> str:
    r"""One argument: its name and default as code, its type as text with ``|`` escaped (outside code, where an escape
    reads the same on GitHub and in MkDocs).

    >>> def f(model: str, tags: list | None = None): ...
    >>> [_arg(p) for p in inspect.signature(f).parameters.values()]
    ['`model` (str, required)', '`tags` (list \\| None, default `None`)']
    """
    kind = [inspect.formatannotation(p.annotation).replace("|", "\\|")] if p.annotation is not p.empty else []
    default = ["required"] if p.default is p.empty else [f"default `{p.default!r}`"]
    return f"`{p.name}` ({', '.join(kind + default)})"


def _args(factory) -> str:
    """A registry factory's arguments, those ``grpo-ext rewards show`` lists; none for a plain reward."""
    params = inspect.signature(factory).parameters.values()
    return ", ".join(_arg(p) for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)) or "none"


def _range(name: str) -> str:
    """The range the reward built from its defaults declares: ``0 to 1``; ``not stated`` where it states none, or
    cannot be built here (``llm_judge`` without the openai package, which states none either)."""
    from grpo_ext.rewards import describe, registry

    try:
        found = describe(registry.sample(name)).score_range
    except ValueError:
        found = None
    return f"{found[0]:g} to {found[1]:g}" if found else "not stated"


def _summary(doc: str | None) -> str:
    r"""A docstring's first paragraph, on one line.

    >>> _summary("Partial credit: 1.0 exact;\n    0.2 has a digit.\n\n    More.")
    'Partial credit: 1.0 exact; 0.2 has a digit.'
    """
    return " ".join(inspect.cleandoc(doc or "").split("\n\n")[0].split())


def render_table() -> str:
    """The reward table, as Markdown, between its markers."""
    from grpo_ext.rewards import REGISTRY

    lines = [START, "", "| reward | scores | args | range (default args) |", "|---|---|---|---|"]
    for name in sorted(REGISTRY):
        factory = REGISTRY[name]
        lines.append(f"| `{name}` | {_cell(_summary(factory.__doc__))} | {_args(factory)} | {_range(name)} |")
    return "\n".join([*lines, "", END])


def with_table(text: str) -> str:
    """The page ``text`` with its table, between the markers, written afresh; ValueError when a marker is missing."""
    found = re.search(re.escape(START) + ".*?" + re.escape(END), text, re.S)
    if found is None:
        raise ValueError(f"docs/{PAGE} lacks the reward table's markers: {START} ... {END}")
    return text[: found.start()] + render_table() + text[found.end() :]


def on_page_markdown(markdown, page, config, files):
    """At a build, the rewards page gets its table written afresh."""
    return with_table(markdown) if page.file.src_uri == PAGE else markdown


def main() -> None:
    """Rewrite the table in the docs folder's page."""
    path = Path(__file__).resolve().parents[1] / PAGE
    path.write_text(with_table(path.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote the reward table into {path}")


if __name__ == "__main__":
    main()
