"""A tokenizer that can show tools to the model and read its tool calls back, as TRL's tool loop needs.

TRL renders the tools into the prompt with the chat template and parses each reply with the tokenizer's response
parser. Many small models ship a chat template that cannot render tools (SmolLM2's ChatML template drops them). For
a recipe with tools:

- ``model.chat_template`` (a Jinja file relative to the recipe) replaces the model's template, always;
- else a template that renders a whole tool conversation is kept (TRL sets the parser for the families it knows);
- else a ChatML template (``<|im_start|>``) is replaced by grpo_ext's ChatML tool template
  (``templates/chatml-tools.jinja``), with the parser of TRL's Qwen family, which reads the same
  ``<tool_call>{json}</tool_call>`` lines; the run says so in one line;
- else the run stops with one line naming ``model.chat_template``.
"""

from pathlib import Path

from grpo_ext.core.errors import RunError
from grpo_ext.core.files import resolve_path
from grpo_ext.settings import compat

TEMPLATE = Path(__file__).with_name("templates") / "chatml-tools.jinja"


def apply(tokenizer, recipe, log) -> None:
    """The recipe's template on ``tokenizer``, for every verb that renders its prompts (train, eval, the checkpoint
    sweep, filter): one that shows the tools for a recipe with tools or an environment, else ``model.chat_template``
    when the recipe sets it, else the model's own."""
    if recipe.tools or recipe.environment:
        prepare(tokenizer, recipe["model"], recipe.base_dir, log)
    elif recipe["model"]["chat_template"]:
        use_template(tokenizer, recipe["model"], recipe.base_dir, log)


def use_template(tokenizer, model_cfg: dict, base_dir: Path, log) -> None:
    """``model.chat_template``'s file in place of the model's template."""
    own = model_cfg["chat_template"]
    tokenizer.chat_template = resolve_path(own, base_dir).read_text(encoding="utf-8")
    log(f"chat template: {own} (model.chat_template)")


def prepare(tokenizer, model_cfg: dict, base_dir: Path, log) -> None:
    """Make ``tokenizer`` render and parse tool calls for a recipe with tools (see the module docstring)."""
    from trl.chat_template_utils import supports_tool_calling

    if model_cfg.get("chat_template"):
        use_template(tokenizer, model_cfg, base_dir, log)
    elif supports_tool_calling(tokenizer):
        return
    elif "<|im_start|>" in (tokenizer.chat_template or ""):
        tokenizer.chat_template = TEMPLATE.read_text(encoding="utf-8")
        log(f"tools: the model's ChatML template cannot show tools; grpo_ext's ChatML tool template is used ({TEMPLATE.name})")
    else:
        raise RunError(
            f"model.name {model_cfg['name']!r}: its chat template cannot show tools to the model, and grpo_ext has no "
            "template for its family; set model.chat_template to a Jinja file that renders tools and tool calls"
        )
    if not supports_tool_calling(tokenizer):
        raise RunError("model.chat_template: the template does not render a tool call and its result; see docs/tools.md")
    _set_parser(tokenizer)


def _set_parser(tokenizer) -> None:
    """The Qwen family's response parser from TRL (``<tool_call>`` lines of JSON), under the attribute the installed
    transformers reads."""
    from trl import chat_template_utils as templates

    if compat.parses_with_response_template():
        tokenizer.response_template = templates.qwen3_template
    else:
        tokenizer.response_schema = templates.qwen3_schema
