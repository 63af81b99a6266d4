"""A tokenizer that can show tools to the model and read its tool calls back, as TRL's tool loop needs.

TRL renders the tools into the prompt with the chat template and parses each reply with the tokenizer's response
parser. Many small models ship a chat template that cannot render tools (SmolLM2's ChatML template drops them). For
a recipe with tools:

- ``model.chat_template`` (a Jinja file relative to the recipe) replaces the model's template, always;
- else a template that renders a whole tool conversation is kept (TRL sets the parser for the families it knows);
- else a ChatML template (``<|im_start|>``) is replaced by grpo_ext's ChatML tool template
  (``templates/chatml-tools.jinja``), with the parser of TRL's Qwen family, which reads the same
  ``<tool_call>{json}</tool_call>`` lines; the run says so in one line;
- else the run stops with one line naming ``model.chat_template`` (a recipe error, exit status 2), as it does when
  the template named there cannot render a tool call and its result.
"""

import copy
import re
from pathlib import Path

from grpo_ext.core.errors import RecipeError
from grpo_ext.core.files import resolve_path
from grpo_ext.recipe import Model, Recipe
from grpo_ext.settings import compat

TEMPLATE = Path(__file__).with_name("templates") / "chatml-tools.jinja"


def apply(tokenizer, recipe: Recipe, log) -> None:
    """The recipe's template on ``tokenizer``, for every verb that renders its prompts (train, eval, the checkpoint
    sweep, filter): one that shows the tools for a recipe with tools or an environment, else ``model.chat_template``
    when the recipe sets it, else the model's own."""
    if recipe.agentic:
        prepare(tokenizer, recipe.model, recipe.base_dir, log)
    elif recipe.model.chat_template:
        use_template(tokenizer, recipe.model.chat_template, recipe.base_dir, log)


def use_template(tokenizer, own: str, base_dir: Path, log) -> None:
    """``model.chat_template``'s file (``own``) in place of the model's template."""
    tokenizer.chat_template = resolve_path(own, base_dir).read_text(encoding="utf-8")
    log(f"chat template: {own} (model.chat_template)")


def prepare(tokenizer, model: Model, base_dir: Path, log) -> None:
    """Make ``tokenizer`` render and parse tool calls for a recipe with tools (see the module docstring)."""
    from trl.chat_template_utils import supports_tool_calling

    if model.chat_template:
        use_template(tokenizer, model.chat_template, base_dir, log)
    elif supports_tool_calling(tokenizer):
        return
    elif "<|im_start|>" in (tokenizer.chat_template or ""):
        tokenizer.chat_template = TEMPLATE.read_text(encoding="utf-8")
        log(f"tools: the model's ChatML template cannot show tools; grpo_ext's ChatML tool template is used ({TEMPLATE.name})")
    else:
        raise RecipeError(
            f"model.name {model.name!r}: its chat template cannot show tools to the model, and grpo_ext has no "
            "template for its family; set model.chat_template to a Jinja file that renders tools, tool calls and their "
            f"results, with calls as <tool_call>{{json}}</tool_call> lines (one for ChatML models to start from: {TEMPLATE})"
        )
    if not supports_tool_calling(tokenizer):
        raise RecipeError(
            f"model.chat_template: {model.chat_template or TEMPLATE.name} does not render a tool call and its "
            "result (TRL's supports_tool_calling); render each message's tool_calls and each tool message's content "
            "(docs/tools.md)"
        )
    _set_parser(tokenizer)


def _set_parser(tokenizer) -> None:
    """The Qwen family's response parser from TRL (``<tool_call>`` lines of JSON), under the attribute the installed
    transformers reads.

    transformers' parser reads the prompt as well as the reply, from the last place the template opens the
    assistant's turn: ChatML's ``<|im_start|>assistant``, in the Qwen parser. A template of the user's that opens it
    otherwise (``<|assistant|>``) would have the whole prompt read as the reply: a ``<tool_call>`` in its system turn,
    or an earlier turn's call, read as a call of this one. So the parser starts where this template's own generation
    prompt does, and a reply ends at the tokenizer's end token."""
    from trl import chat_template_utils as templates

    if not compat.parses_with_response_template():
        tokenizer.response_schema = templates.qwen3_schema  # a regex over the reply alone
        return
    template = templates.qwen3_template
    opener = _assistant_opener(tokenizer)
    if opener and opener != template["start_anchor"]:
        template = copy.deepcopy(template)
        template["start_anchor"] = opener
        if tokenizer.eos_token:
            template["fields"]["content"]["close_pattern"] = re.escape(tokenizer.eos_token) + r"\s*"
    tokenizer.response_template = template


def _assistant_opener(tokenizer) -> str:
    """What the chat template writes to open the assistant's turn (its generation prompt), or empty when it is not
    a text the prompt ends with, or a lone user turn does not render (the Qwen parser's own anchor is kept then)."""
    turn = [{"role": "user", "content": "x"}]
    try:
        prompt = tokenizer.apply_chat_template(turn, tokenize=False, add_generation_prompt=True)
        bare = tokenizer.apply_chat_template(turn, tokenize=False, add_generation_prompt=False)
    except Exception:  # a template that wants a system turn first, or raises on its own: TRL's run will say
        return ""
    return prompt[len(bare) :] if isinstance(prompt, str) and isinstance(bare, str) and prompt.startswith(bare) else ""
