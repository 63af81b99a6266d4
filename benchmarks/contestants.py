"""Training runs that the benchmarks race against each other, one per process.

    python benchmarks/contestants.py NAME --max-steps N [--check-every K] [--launched T] [--recipe NAME] [--anatomy]

NAME is one of:
  seed   the tutorial's training script as written (Chinese plain-text prompts, strict 0/1 reward,
         its GRPOConfig), on the same model; two changes only so it runs at all on TRL 1.16 and a CPU:
         max_prompt_length is left out (TRL 1.16 rejects it) and use_cpu=True is added.
  plain  a plain-TRL script: English chat prompts, the partial-credit digit reward, TRL's defaults
         apart from 16 completions of 8 tokens per step, learning rate 1e-5, one log line per step.
  ours   grpo_ext with the shipped recipes/digit.yaml (its own before/after eval off: the race's
         checks below replace it for every contestant alike), or with the recipe --recipe names
         (e.g. arith-tools; the checks then still score the digit task, so leave --check-every at 0).
  same   plain TRL with exactly the GRPOConfig that grpo_ext builds from recipes/digit.yaml.

Every contestant gets the same callback: every K steps it samples 8 completions for each held-out
prompt and scores digit_exact; at a pass rate of 0.9 or more it stops training. Each step's wall time
is recorded. The process prints one JSON line: steps, step times, checks, and when it solved the task,
in seconds since --launched (the parent's launch time), its rank (RANK under ``accelerate launch``, 0 alone), and
for grpo_ext the ``skipped_rows`` of each logged step (the share of rows left out of the loss).

With --anatomy, each step's time is also split into phases (``phases``: one dict per step, seconds of each
phase, exclusive of the phases nested in it; ``other`` is the rest of the step): generation, reward scoring,
forward passes without gradient (old or reference log-probs), the loss's forward pass and the loss itself,
backward, and the optimizer step. The timers wrap TRL's and accelerate's own methods in this process only.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SEED_PROMPTS = [
    "请直接输出一个 0 到 9 之间的整数，不要解释。",
    "只输出一个 0 到 9 的整数。",
    "你的回答必须只有一个数字，范围是 0 到 9。",
    "请输出一个数字，数字必须在 0 到 9 之间。",
    "请用单个数字回答，范围 0 到 9。",
]

SEED_CONFIG = {
    "learning_rate": 5e-6,
    "beta": 0.04,
    "max_completion_length": 32,
    "num_generations": 8,
    "temperature": 0.8,
    "per_device_train_batch_size": 2,
    "gradient_accumulation_steps": 4,
    "num_train_epochs": 1,
    "logging_steps": 10,
    "save_strategy": "no",
    "bf16": True,
}


def seed_reward(completions, **kwargs):
    """The tutorial's reward, verbatim in behaviour: 1.0 for a single digit character, else 0.0."""
    rewards = []
    for completion in completions:
        text = completion.strip()
        rewards.append(1.0 if len(text) == 1 and text.isdigit() and 0 <= int(text) <= 9 else 0.0)
    return rewards


def race_callback(eval_prompts: list, chat: bool, check_every: int, launched: float, record: dict):
    from transformers import TrainerCallback

    from grpo_ext.results import scoring
    from grpo_ext.rewards.digit import digit_exact
    from grpo_ext.run import data, sampling

    rows = [{"prompt": data.format_prompt(p, None, chat)} for p in eval_prompts]
    settings = sampling.Settings(samples=8, max_new_tokens=8, temperature=1.0, batch_size=64, pass_threshold=1.0, seed=0)

    class Race(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.monotonic()

        def on_step_end(self, args, state, control, model=None, processing_class=None, **kw):
            record["step_seconds"].append(round(time.monotonic() - self.t0, 3))
            if record["first_step_at"] is None:
                record["first_step_at"] = round(time.time() - launched, 2)
            if check_every and state.global_step % check_every == 0:
                result = scoring.score_model(model, processing_class, rows, [digit_exact], settings, chat=chat)
                rate = result["rewards"]["digit_exact"]["pass_rate"]
                record["checks"].append([state.global_step, rate, round(time.time() - launched, 1)])
                if rate >= 0.9 and record["solved_at"] is None:
                    record["solved_at"] = round(time.time() - launched, 1)
                    record["solved_step"] = state.global_step
                    control.should_training_stop = True

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "skipped_rows" in logs:  # grpo_ext's share of rows left out of the loss, one entry a log
                record.setdefault("skipped_rows", []).append(logs["skipped_rows"])

    return Race()


def phase_timers(record: dict):
    """Wrap the methods that make up a GRPO step with timers; return a callback that closes each step's tally."""
    from accelerate import Accelerator
    from accelerate.optimizer import AcceleratedOptimizer
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    from grpo_ext.run import trl_internals

    methods = [(GRPOTrainer, name, phase) for name, phase in trl_internals.STEP_PHASES]
    methods += [
        (Accelerator, "backward", "backward"),
        (AcceleratedOptimizer, "step", "optimizer"),
    ]
    tally: dict[str, float] = {}
    stack: list[list] = []  # [phase, seconds spent in phases nested inside it]
    missing = [name for cls, name, _ in methods if not hasattr(cls, name)]
    if missing:
        raise SystemExit(f"error: --anatomy: this TRL has no {', '.join(missing)}; the phase timers need them")

    def timed(fn, phase):
        def wrapper(*args, **kwargs):
            label = phase
            if phase == "forward":  # a log-prob pass inside the loss has a gradient; the others do not
                label = "loss forward" if any(frame[0] == "loss" for frame in stack) else "forward, no grad"
            stack.append([label, 0.0])
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - t0
                _, nested = stack.pop()
                tally[label] = tally.get(label, 0.0) + spent - nested
                if stack:
                    stack[-1][1] += spent

        return wrapper

    for cls, name, phase in methods:
        setattr(cls, name, timed(getattr(cls, name), phase))

    class Phases(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            tally.clear()
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            total = time.perf_counter() - self.t0
            step = {k: round(v, 4) for k, v in tally.items()}
            step["other"] = round(total - sum(tally.values()), 4)
            record.setdefault("phases", []).append(step)

    return Phases()


def plain_trl(config: dict, prompts: list, reward_funcs: list, chat: bool, cb, extra: list | None = None) -> None:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from grpo_ext.run import model_cache
    from grpo_ext.settings import model_names

    # The same cached checkpoint every contestant starts from.
    model_dir = model_cache.materialize(model_names.resolve("smollm2-135m-instruct", ROOT), log=lambda _m: None)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    rows = [[{"role": "user", "content": p}] for p in prompts] if chat else prompts
    dataset = Dataset.from_dict({"prompt": rows})
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(output_dir=out, **config)
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward_funcs,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[cb, *(extra or [])],
        )
        trainer.train()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("name", choices=["seed", "plain", "ours", "same"])
    p.add_argument("--max-steps", type=int, required=True)
    p.add_argument("--check-every", type=int, default=0)
    p.add_argument("--launched", type=float, default=None)
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra recipe override for 'ours' (e.g. training.bf16=true); repeatable",
    )
    p.add_argument("--anatomy", action="store_true", help="split each step's time into its phases")
    p.add_argument("--recipe", default="digit", help="the recipe 'ours' trains (a shipped name or a file)")
    args = p.parse_args()
    launched = args.launched or time.time()
    record = {
        "name": args.name,
        "rank": int(os.environ.get("RANK", "0")),
        "first_step_at": None,
        "step_seconds": [],
        "checks": [],
        "solved_at": None,
        "solved_step": None,
    }
    extra = [phase_timers(record)] if args.anatomy else []

    import yaml

    digit = yaml.safe_load((ROOT / "recipes" / "digit.yaml").read_text())
    zh = yaml.safe_load((ROOT / "recipes" / "digit-zh.yaml").read_text())
    from grpo_ext.rewards.digit import digit_exact, digit_shaped

    if args.name == "seed":
        cb = race_callback(zh["data"]["eval_prompts"], False, args.check_every, launched, record)
        config = {**SEED_CONFIG, "use_cpu": True, "max_steps": args.max_steps, "report_to": "none", "disable_tqdm": True}
        plain_trl(config, SEED_PROMPTS, [seed_reward], False, cb, extra)
    elif args.name == "plain":
        cb = race_callback(digit["data"]["eval_prompts"], True, args.check_every, launched, record)
        config = {
            "use_cpu": True,
            "per_device_train_batch_size": 16,
            "num_generations": 8,
            "max_completion_length": 8,
            "learning_rate": 1e-5,
            "logging_steps": 1,
            "max_steps": args.max_steps,
            "save_strategy": "no",
            "report_to": "none",
            "disable_tqdm": True,
        }
        plain_trl(config, digit["data"]["prompts"], [digit_shaped], True, cb, extra)
    elif args.name == "same":
        import grpo_ext
        from grpo_ext.run import hardware, trainer

        r = grpo_ext.load_recipe("digit")
        kwargs, _, _ = trainer.config_kwargs(r)
        hardware.device_defaults(kwargs, r.model.quantization is not None)
        kwargs.update(max_steps=args.max_steps, save_strategy="no")
        kwargs.pop("output_dir")
        cb = race_callback(digit["data"]["eval_prompts"], True, args.check_every, launched, record)
        plain_trl(kwargs, digit["data"]["prompts"], [digit_exact, digit_shaped], True, cb, extra)
    else:
        import grpo_ext

        cb = race_callback(digit["data"]["eval_prompts"], True, args.check_every, launched, record)
        with tempfile.TemporaryDirectory() as out:
            overrides = [
                f"output_dir={out}/run",
                "eval.enabled=false",
                "training.save_strategy='no'",
                f"training.max_steps={args.max_steps}",
                *args.set,
            ]
            try:
                grpo_ext.train(args.recipe, overrides, callbacks=[cb, *extra])
            except grpo_ext.RecipeError as exc:
                raise SystemExit("\n".join(exc.lines())) from None
            except grpo_ext.RunError as exc:
                raise SystemExit(f"error: {exc}") from None
    record["steps"] = len(record["step_seconds"])
    if os.environ.get("CONTESTANT_RESULTS"):  # several processes: one file each, as their stdout lines interleave
        Path(os.environ["CONTESTANT_RESULTS"], f"result-{record['rank']}.json").write_text(json.dumps(record))
    print("RESULT " + json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
