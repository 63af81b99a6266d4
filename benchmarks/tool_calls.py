"""How often a model calls its tool before any training, by what it is shown: a system prompt, worked exchanges.

    python benchmarks/tool_calls.py [--recipe recipes/arith-tools.yaml] [--prompts 4] [--samples 8]
                                    [--temperatures 1.0,0.7] [--tokens 48]

The recipe gives the model, the tools, the system prompt and the worked exchanges (``data.examples``, taken two
turns of user and assistant at a time as one exchange), and the training prompts (the first ``--prompts``). For each
setup and temperature, ``--samples`` completions per prompt are drawn, one turn, under the chat template the run
would use, and counted: completions with a ``<tool_call>``, and valid calls (the JSON parsed, the tool is one of the
recipe's and ran). Setups alternate within each temperature, all seeded alike. No training, no run directory.
"""

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_ext.core.text import plural  # noqa: E402
from grpo_ext.data import examples  # noqa: E402
from grpo_ext.recipe import load  # noqa: E402
from grpo_ext.run import chat_tools, data, models  # noqa: E402
from grpo_ext.tools.checks import tool_methods  # noqa: E402

CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


def exchanges(turns: list[dict]) -> list[list[dict]]:
    """The worked examples cut into exchanges, each from a user turn to the turn before the next user turn."""
    out: list[list[dict]] = []
    for message in turns:
        if message["role"] == "user" or not out:
            out.append([])
        out[-1].append(message)
    return out


def valid(text: str, tools: dict) -> bool:
    match = CALL.search(text)
    if not match:
        return False
    try:
        call = json.loads(match.group(1))
        return bool(tools[call["name"]](**call["arguments"]) is not None)
    except (ValueError, KeyError, TypeError):
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/arith-tools.yaml")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--temperatures", default="1.0,0.7")
    parser.add_argument("--tokens", type=int, default=48)
    args = parser.parse_args()

    import torch

    recipe = load(args.recipe)
    model, tokenizer, _ = models.load(recipe.model, recipe.base_dir, lambda _line: None)
    chat_tools.prepare(tokenizer, recipe.model, recipe.base_dir, lambda _line: None)
    tools = {fn.__name__: fn for fn in recipe.tool_functions}
    if recipe.environment_class is not None:  # its methods, on a game reset with the first training row
        first = data.train_rows(recipe.data, recipe.base_dir, 1)[0]
        game = recipe.environment_class()
        game.reset(**first)
        tools |= {name: getattr(game, name) for name in tool_methods(recipe.environment_class)}
    shots = exchanges(examples.messages(recipe.data.examples))
    system = recipe.data.system_prompt
    setups = {
        "the system prompt": (system, []),
        "the system prompt and one worked exchange": (system, shots[:1]),
        f"{plural(len(shots), 'worked exchange')}, no system prompt": (None, shots),
        f"the system prompt and {plural(len(shots), 'worked exchange')}": (system, shots),
    }
    prompts = [row["prompt"] for row in data.train_rows(recipe.data, recipe.base_dir, args.prompts)]
    n = len(prompts) * args.samples
    print(f"{args.recipe}: {n} samples per line ({len(prompts)} prompts x {args.samples}), {args.tokens} tokens each")
    print(f"{'what the model was shown':<52} {'temperature':>11} {'calls':>7} {'valid':>7}")
    for temperature in [float(t) for t in args.temperatures.split(",")]:
        for label, (head, shown) in setups.items():
            calls = good = 0
            for i, prompt in enumerate(prompts):
                messages = data.format_prompt(prompt, head, True, [m for exchange in shown for m in exchange])
                text = tokenizer.apply_chat_template(
                    messages, tools=list(tools.values()), tokenize=False, add_generation_prompt=True
                )
                ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)
                torch.manual_seed(i)
                with torch.no_grad():
                    out = model.generate(
                        **ids,
                        do_sample=True,
                        temperature=temperature,
                        top_k=0,
                        top_p=1.0,
                        max_new_tokens=args.tokens,
                        num_return_sequences=args.samples,
                        pad_token_id=tokenizer.pad_token_id,
                    )
                for row in out:
                    completion = tokenizer.decode(row[ids["input_ids"].shape[1] :], skip_special_tokens=True)
                    calls += "<tool_call>" in completion
                    good += valid(completion, tools)
            print(f"{label:<52} {temperature:>11g} {calls:>3}/{n:<3} {good:>3}/{n:<3}", flush=True)


if __name__ == "__main__":
    main()
