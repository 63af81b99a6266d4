"""The docs: every recipe key has its one line of documentation, the generated key reference names every key, the
README stays a front door whose links resolve, and every page of the site is in its nav. Needs neither MkDocs nor
torch: the build hook is imported from its file."""

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from grpo_ext.recipe.schema import SCHEMA, TOP_LEVEL

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_LIMIT = 15_000
# The two commands CI and a first-time reader copy from the README, byte for byte.
README_COMMANDS = [
    "python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 -e . && .venv/bin/python -m grpo_ext.train recipes/digit.yaml",
    'python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 -e ".[test]" && .venv/bin/python -m pytest',
]


@pytest.fixture(scope="module")
def hook():
    """docs/hooks/keys.py, loaded from its path (it is not a package module)."""
    spec = importlib.util.spec_from_file_location("grpo_ext_docs_keys_hook", DOCS / "hooks" / "keys.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def all_specs() -> list[tuple[str, object]]:
    """(key path as a recipe writes it, Spec) for every top-level key and every key of every section."""
    specs = list(TOP_LEVEL.items())
    for section, keys in SCHEMA.items():
        prefix = "rewards[i]" if section == "reward" else section
        specs += [(f"{prefix}.{key}", spec) for key, spec in keys.items()]
    return specs


class _IgnoreTags(yaml.SafeLoader):
    """mkdocs.yml may carry tags for MkDocs (``!!python/name:``, ``!relative``); read them as null."""


_IgnoreTags.add_multi_constructor("", lambda loader, suffix, node: None)


def mkdocs_config() -> dict:
    return yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_IgnoreTags)


def nav_pages(node) -> list[str]:
    """Every page path in a nav tree: strings, and the values of ``Title: page`` mappings, at any depth."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [page for item in node for page in nav_pages(item)]
    if isinstance(node, dict):
        return [page for value in node.values() for page in nav_pages(value)]
    return []


def excluded(relative: str, patterns: list[str]) -> bool:
    """Whether ``exclude_docs`` (folder entries end with ``/``) leaves a docs file out of the site."""
    return any(relative == p or (p.endswith("/") and relative.startswith(p)) for p in patterns)


def test_every_recipe_key_has_a_doc():
    missing = [path for path, spec in all_specs() if not (spec.doc or "").strip()]
    assert not missing, f"recipe keys without doc= in grpo_ext/recipe/schema.py: {', '.join(missing)}"


def test_the_key_reference_names_every_key(hook):
    text = hook.render_keys()
    missing = [path for path, _ in all_specs() if f"`{path}`" not in text]
    assert not missing, f"docs/hooks/keys.py render_keys() leaves out: {', '.join(missing)}"
    assert text.startswith("# Recipe keys\n")


def test_readme_is_a_front_door(hook):
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes; keep it at most {README_LIMIT} (move detail to docs/)"
    lines = README.read_text(encoding="utf-8").splitlines()
    for command in README_COMMANDS:
        assert command in lines, f"README.md lost the command line {command!r}"


def relative_links(page: Path) -> list[str]:
    """The targets of a Markdown page's links and images that name a file (not a web address, not an anchor of the
    page itself), without their anchors; code (fenced blocks, inline spans) left out."""
    text = re.sub(r"(?ms)^(```|~~~).*?^\1", "", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)
    found = re.findall(r"\]\(\s*(?:<([^>\n]+)>|([^)\s]+))(?:\s+\"[^\"]*\")?\s*\)", text)  # (target) or (<target>)
    targets = [bracketed or plain for bracketed, plain in found]
    return [t.split("#")[0] for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[a](docs/a.md) and [b](docs/b.md#anchor)", ["docs/a.md", "docs/b.md"]),  # the file, its anchor aside
        ('![plot](img/p.png "title") [c](<my page.md>)', ["img/p.png", "my page.md"]),  # an image, a title, <...>
        ("[w](https://x.org/a.md) [m](mailto:a@b.c) [t](#top)", []),  # web addresses and the page's own anchors
        ("`[e](e.md)`\n```\n[f](f.md)\n```\n~~~\n[g](g.md)\n~~~\n[h](h.md)", ["h.md"]),  # code is not a link
    ],
)
def test_relative_links(text, expected, tmp_path):
    (tmp_path / "p.md").write_text(text, encoding="utf-8")
    assert relative_links(tmp_path / "p.md") == expected


PAGES = [README, ROOT / "CONTRIBUTING.md", *sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.relative_to(DOCS).parts)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_resolve_in_a_checkout(page):
    """A link from the README or a docs page names a file of the checkout, as a reader on GitHub follows it: no page
    that only a docs build makes."""
    links = relative_links(page)
    broken = [link for link in links if not (page.parent / link).exists()]
    assert not broken, f"{page.relative_to(ROOT)} links to files a checkout lacks: {', '.join(broken)}"


def test_readme_links_to_docs():
    assert any(link.startswith("docs/") for link in relative_links(README)), "README.md links to no docs page"


def test_the_key_reference_is_committed_and_current(hook):
    """docs/reference/keys.md is in the tree, as render_keys() writes it from the schema and the TRL tables."""
    page = DOCS / hook.PAGE
    fix = "run .venv/bin/python docs/hooks/keys.py and commit the page"
    assert page.is_file(), f"docs/{hook.PAGE} is missing; {fix}"
    assert page.read_text(encoding="utf-8") == hook.render_keys(), f"docs/{hook.PAGE} is stale; {fix}"


@pytest.fixture(scope="module")
def rewards_hook():
    """docs/hooks/rewards.py, loaded from its path."""
    spec = importlib.util.spec_from_file_location("grpo_ext_docs_rewards_hook", DOCS / "hooks" / "rewards.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reward_table_is_current(rewards_hook):
    """docs/rewards.md holds the reward table as render_table() writes it from the registry, between its markers."""
    text = (DOCS / rewards_hook.PAGE).read_text(encoding="utf-8")
    fix = "run .venv/bin/python docs/hooks/rewards.py and commit the page"
    assert rewards_hook.with_table(text) == text, f"the reward table of docs/{rewards_hook.PAGE} is stale; {fix}"


def test_the_reward_table_names_every_reward_and_what_it_declares(rewards_hook):
    """A row per registry name, with its arguments and its declared range, from the rewards themselves."""
    from grpo_ext.rewards import REGISTRY

    rows = {
        line.split(" | ")[0].strip("| `"): line for line in rewards_hook.render_table().splitlines() if line.startswith("| `")
    }
    assert sorted(rows) == sorted(REGISTRY)
    cases = [
        ("digit_exact", "| none | 0 to 1 |"),  # a plain reward: no args, UNIT
        ("overlong_penalty", "`max_length` (int, required), `soft_margin` (int, required) | -1 to 0 |"),  # built from EXAMPLES
        ("repetition_penalty", "`max_penalty` (float, default `-1.0`) | -1 to 0 |"),  # its range from its default args
        ("reward_model", "| not stated |"),  # a reward that states no range
        ("tag_count", "`tags` (list[str] \\| tuple[str, ...], default `('think', 'answer')`)"),  # a type's pipe escaped
        ("think_answer_format", "| 1.0 when the completion is one `<think>...</think>` block"),  # docstring code as Markdown
    ]
    for name, part in cases:
        assert part in rows[name], (name, rows[name])


def test_every_docs_page_is_in_the_nav(hook):
    config = mkdocs_config()
    patterns = [line.strip() for line in (config.get("exclude_docs") or "").splitlines() if line.strip()]
    nav = nav_pages(config.get("nav") or [])
    pages = sorted(
        path.relative_to(DOCS).as_posix()
        for path in DOCS.rglob("*.md")
        if not path.relative_to(DOCS).as_posix().startswith("hooks/")
    )
    pages = [page for page in pages if not excluded(page, patterns)]
    missing = [page for page in pages if page not in nav]
    assert not missing, f"docs pages missing from mkdocs.yml nav: {', '.join(missing)}"
    assert hook.PAGE in nav, f"the generated {hook.PAGE} is missing from mkdocs.yml nav"
    unknown = [page for page in nav if page != hook.PAGE and not (DOCS / page).is_file()]
    assert not unknown, f"mkdocs.yml nav names pages that do not exist: {', '.join(unknown)}"


def test_the_readme_links_every_docs_page(hook):
    """Everything that moved out of the README stays reachable from it."""
    text = README.read_text(encoding="utf-8")
    nav = nav_pages(mkdocs_config().get("nav") or [])
    top = [page for page in nav if "/" not in page or page == hook.PAGE or page == "benchmarks/index.md"]
    unlinked = [page for page in top if f"(docs/{page})" not in text]
    assert not unlinked, f"README.md's docs index does not link: {', '.join(unlinked)}"


@pytest.mark.parametrize("page", sorted(p.name for p in (DOCS / "benchmarks").glob("*.md") if p.name != "index.md"), ids=str)
def test_each_benchmark_page_opens_with_command_date_and_machine(page):
    text = (DOCS / "benchmarks" / page).read_text(encoding="utf-8")
    head = text.split("\n## ", 1)[0]
    assert "```" in head, f"docs/benchmarks/{page}: open with the command that measured it"
    assert re.search(r"^- Date: ", head, re.M), f"docs/benchmarks/{page}: say the date (or 'date not recorded')"
    assert re.search(r"^- Machines?: ", head, re.M), f"docs/benchmarks/{page}: say the machine"
    index = (DOCS / "benchmarks" / "index.md").read_text(encoding="utf-8")
    assert f"]({page})" in index, f"docs/benchmarks/index.md does not list {page}"
