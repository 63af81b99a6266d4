"""What a tool recipe's eval costs against the same prompts as single replies, and what TRL's generation options change.

    python benchmarks/tool_generation.py [--rounds 2] [--prompts 4] [--samples 4]
        [--candidate "LABEL: key=value ..."] [--set key=value ...] [--greedy]
        [--single recipes/arith.yaml] [--tools recipes/arith-tools.yaml]

Contestants: ``single`` samples ``--single``'s eval prompts as single replies (``model.generate``, as ``grpo-ext
eval`` does for a recipe without tools); ``tools`` plays ``--tools``'s eval prompts through TRL's tool loop (the
trainer's generation in eval mode, as ``grpo-ext eval`` and a run's eval before and after do, the prompt tokens a
batch shares encoded once: ``groups.share_prompt``); each candidate is ``tools`` with recipe overrides, e.g.
``--candidate "whole: groups.share_prompt=false"``, ``--candidate "cb: training.use_transformers_continuous_batching=true"``
or, with an environment variable, ``--candidate "copied: GRPO_EXT_PREFIX_ONCE=0"``.
Every contestant takes the first ``--prompts`` held-out prompts (``eval.max_prompts``) x ``--samples``
(``eval.samples``); ``--set`` adds overrides to every contestant (``--set model.name=DIR`` for another model).
Each run is a process of its own, loading the recipe's model from the local cache as ``grpo-ext eval`` does; the
contestants alternate (A B C, then C B A) so that a busy patch of the machine hits all of them.

Per contestant, the medians over rounds: the process's wall seconds (imports and model load included), the
sampling's seconds, the process's peak RSS, and what the model computed, read off forward hooks on the loaded model
(no change to TRL): prompt tokens prefilled (those of the prompts and of every conversation prefilled again after a
tool result; padding apart), tokens decoded (one per row and step, finished rows included, as ``generate`` runs
them), the completion tokens that came back, and the seconds spent in forward calls that prefilled against those
that only decoded (a continuous-batching call that mixes both counts as prefill). The ratios are to ``single``.

With ``--greedy`` every contestant samples once at temperature 0 and the script prints, for ``tools`` and each
candidate, two by two, how many of their conversations are the same text, and the first that differs.
"""

import argparse
import json
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _runner import environment  # noqa: E402


def candidate(text: str) -> tuple[str, list[str]]:
    """A candidate's label and its words: recipe overrides (key=value) and environment variables (``_runner.environment``)."""
    label, sep, overrides = text.partition(":")
    if not sep or not label.strip() or not overrides.strip():
        raise argparse.ArgumentTypeError(f"--candidate {text!r}: write it as 'LABEL: key=value [key=value ...]'")
    return label.strip(), shlex.split(overrides)


class Counter:
    """Forward hooks on the model: tokens and seconds of the calls that prefilled and of those that only decoded."""

    def __init__(self):
        self.tokens = {"prefill": 0, "padding": 0, "decode": 0}
        self.seconds = {"prefill": 0.0, "decode": 0.0}
        self.calls = {"prefill": 0, "decode": 0}
        self._start, self._kind = 0.0, "decode"

    def before(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        lengths = kwargs.get("cu_seq_lens_q")
        if lengths is not None:  # continuous batching: one packed row, each request's new tokens in turn
            queries = (lengths[1:] - lengths[:-1]).tolist()
            prefilled = sum(q for q in queries if q > 1)
            self.tokens["prefill"] += prefilled
            self.tokens["decode"] += sum(q for q in queries if q == 1)
            self._kind = "prefill" if prefilled else "decode"
        elif ids is not None and ids.shape[-1] > 1:  # generate's first call of a batch: the whole (left-padded) prompts
            real = int(mask[:, -ids.shape[-1] :].sum()) if mask is not None and mask.dim() == 2 else ids.numel()
            self.tokens["prefill"] += real
            self.tokens["padding"] += ids.numel() - real
            self._kind = "prefill"
        elif ids is not None:  # one new token a row
            self.tokens["decode"] += ids.shape[0]
            self._kind = "decode"
        self._start = time.perf_counter()

    def after(self, module, args, kwargs, output):
        self.seconds[self._kind] += time.perf_counter() - self._start
        self.calls[self._kind] += 1


def child(recipe_path: str, overrides: list[str]) -> dict:
    """One contestant in this process: load the recipe's model, sample its eval prompts as ``grpo-ext eval`` does."""
    import tempfile

    from grpo_ext.core import console
    from grpo_ext.recipe import load
    from grpo_ext.run import chat_tools, data, hardware, rollouts, sampling
    from grpo_ext.verbs import evaluate

    started = time.monotonic()
    console.quiet_third_parties(False)
    recipe = load(recipe_path, overrides)
    s = sampling.settings(recipe, bf16=hardware.uses_bf16(recipe))
    model, tokenizer, _ = evaluate.load_model(recipe.model.name, recipe.model, console.say)
    counter = Counter()
    model.register_forward_pre_hook(counter.before, with_kwargs=True)
    model.register_forward_hook(counter.after, with_kwargs=True)
    chat_tools.apply(tokenizer, recipe, console.say)
    chat = data.use_chat(recipe.data, tokenizer)
    rows = evaluate.prompts_to_score(recipe, chat, console.say)
    t0 = time.monotonic()
    if recipe.agentic:
        with tempfile.TemporaryDirectory(prefix="tool_generation_") as scratch:
            trainer = rollouts.sampler(recipe, model, tokenizer, rows, scratch)
            played = sampling.play(trainer, rows, s)
        texts, ids = played.transcripts(), played.completion_ids
    else:
        with sampling.precision(model, s):
            texts, ids = sampling.sample(model, tokenizer, [r["prompt"] for r in rows], s)
        texts, ids = [t for per in texts for t in per], [x for per in ids for x in per]
    sampled = time.monotonic() - t0
    return {
        "sampling": round(sampled, 2),
        "process": round(time.monotonic() - started, 2),
        "rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),  # Linux: KiB
        "tokens": counter.tokens,
        "seconds": {k: round(v, 2) for k, v in counter.seconds.items()},
        "calls": counter.calls,
        "completion_tokens": sum(len(x) for x in ids),
        "conversations": len(texts),
        "texts": texts,
        "weights": str(next(model.parameters()).dtype).removeprefix("torch."),
    }


def launch(recipe: str, words: list[str]) -> dict:
    import os

    launched = time.time()
    overrides, env = environment(words)
    cmd = [sys.executable, __file__, "--child", recipe, *overrides]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False, env={**os.environ, **env})
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"error: {recipe} {' '.join(overrides)} failed (exit {proc.returncode}): {tail}")
    record = json.loads(lines[-1][len("RESULT ") :])
    record["wall"] = round(time.time() - launched, 1)
    return record


def table(runs: dict[str, list[dict]]) -> list[str]:
    def med(label: str, read) -> float:
        return statistics.median(read(r) for r in runs[label])

    columns = [
        ("wall s", lambda r: r["wall"], "{:.1f}"),
        ("sampling s", lambda r: r["sampling"], "{:.1f}"),
        ("peak RSS GiB", lambda r: r["rss_gib"], "{:.2f}"),
        ("prompt tok", lambda r: r["tokens"]["prefill"], "{:.0f}"),
        ("padding tok", lambda r: r["tokens"]["padding"], "{:.0f}"),
        ("decoded tok", lambda r: r["tokens"]["decode"], "{:.0f}"),
        ("completion tok", lambda r: r["completion_tokens"], "{:.0f}"),
        ("prefill s", lambda r: r["seconds"]["prefill"], "{:.1f}"),
        ("decode s", lambda r: r["seconds"]["decode"], "{:.1f}"),
        ("prefill calls", lambda r: r["calls"]["prefill"], "{:.0f}"),
        ("decode calls", lambda r: r["calls"]["decode"], "{:.0f}"),
    ]
    labels = list(runs)
    width = max(14, *(len(label) + 2 for label in labels))
    head = "".join(f"{label:>{width}}" for label in labels) + "".join(f"{lb + '/single':>{width + 7}}" for lb in labels[1:])
    lines = [f"{'':<16}" + head]
    for name, read, fmt in columns:
        base = med("single", read)
        cells = "".join(f"{fmt.format(med(label, read)):>{width}}" for label in labels)
        ratios = "".join(f"{(med(lb, read) / base if base else float('nan')):>{width + 7}.2f}" for lb in labels[1:])
        lines.append(f"{name:<16}" + cells + ratios)
    return lines


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print("RESULT " + json.dumps(child(sys.argv[2], sys.argv[3:])), flush=True)
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--prompts", type=int, default=4, help="held-out prompts (eval.max_prompts)")
    p.add_argument("--samples", type=int, default=4, help="samples a prompt (eval.samples)")
    p.add_argument("--single", default="recipes/arith.yaml", help="the recipe sampled as single replies")
    p.add_argument("--tools", default="recipes/arith-tools.yaml", help="the recipe played through the tool loop")
    p.add_argument("--candidate", type=candidate, action="append", default=[], help="'LABEL: key=value ...' on --tools")
    p.add_argument("--set", action="append", default=[], help="an override for every contestant (key=value)")
    p.add_argument("--greedy", action="store_true", help="once each at temperature 0: do the candidates write what tools writes?")
    args = p.parse_args()
    common = [f"eval.max_prompts={args.prompts}", f"eval.samples={args.samples}", *args.set]
    if args.greedy:
        common.append("eval.temperature=0")
    contestants = [("single", args.single, []), ("tools", args.tools, [])]
    contestants += [(label, args.tools, sets) for label, sets in args.candidate]
    runs: dict[str, list[dict]] = {label: [] for label, _, _ in contestants}
    for i in range(1 if args.greedy else args.rounds):
        for label, recipe, sets in contestants if i % 2 == 0 else contestants[::-1]:
            r = launch(recipe, [*common, *sets])
            runs[label].append(r)
            print(
                f"round {i + 1} {label:<10} wall {r['wall']:.1f} s, sampling {r['sampling']:.1f} s, "
                f"peak RSS {r['rss_gib']:.2f} GiB, weights {r['weights']} after",
                flush=True,
            )
    print()
    greedy = ", temperature 0" if args.greedy else ""
    print(f"{args.prompts} prompts x {args.samples} samples{greedy}; medians of {len(runs['single'])} runs")
    print("\n".join(table(runs)))
    if args.greedy:
        played = [label for label, _, _ in contestants[1:]]
        for i, first in enumerate(played):
            for other in played[i + 1 :]:
                a_texts, b_texts = runs[first][0]["texts"], runs[other][0]["texts"]
                same = sum(a == b for a, b in zip(a_texts, b_texts, strict=True))
                print(f"greedy: {other} wrote the same conversation as {first} in {same} of {len(a_texts)}")
                for a, b in zip(a_texts, b_texts, strict=True):
                    if a != b:
                        print(f"  first difference: {first} {json.dumps(a)[:100]}  {other} {json.dumps(b)[:100]}")
                        break


if __name__ == "__main__":
    main()
