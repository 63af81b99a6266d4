"""math_accuracy against TRL's accuracy_reward on one fixed corpus: agreement, disagreements, speed.

    python benchmarks/rewards.py [--size 10400]

The corpus (built from a fixed seed) holds correct, wrong, malformed and adversarial (completion,
answer) pairs. Both rewards score all of it in this one run, in the main thread, each timed on its own.
Agreement counts the pairs where both give a verdict (TRL gives None, as we do, for a reference it
cannot parse). Every disagreement class is printed with its count, an example and the reason.
"""

import argparse
import collections
import logging
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

FORMS = {
    "boxed": lambda x: f"Adding the parts gives the total, so the answer is $\\boxed{{{x}}}$.",
    "final_answer": lambda x: f"Working it through step by step. The final answer is ${x}$.",
    "marker": lambda x: f"She pays 3 + 4 = 7 for the first two, then the rest.\n#### {x}",
    "tag": lambda x: f"<think>3 apples and then some more</think><answer>{x}</answer>",
    "last_number": lambda x: f"First 2 of them, then 5 more, so in the end there are {x}",
}

# Why each disagreement class is math_accuracy's verdict that is right: (form, ours, trl) -> reason.
REASONS = {
    (
        "marker",
        1.0,
        0.0,
    ): "the correct answer follows the GSM8K marker '#### '; TRL reads LaTeX only in \\boxed{} or after 'final answer is', "
    "so it finds no answer",
    (
        "tag",
        1.0,
        0.0,
    ): "the correct answer sits in <answer></answer>; TRL reads LaTeX only in \\boxed{} or after 'final answer is', "
    "so it finds no answer",
    (
        "last_number",
        1.0,
        0.0,
    ): "the completion ends with the correct number in plain text; TRL reads LaTeX only in \\boxed{} or after 'final answer is'",
}


def corpus(size: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    pairs = []

    def add(category, form, completion, answer):
        pairs.append({"category": category, "form": form, "completion": completion, "answer": answer})

    adversarial = [
        ("adv_tower", "$\\boxed{10^{10^{10^{10}}}}$", "5"),
        ("adv_parens", "$\\boxed{" + "(" * 10_000 + "1" + ")" * 10_000 + "}$", "1"),
        ("adv_mb", "The answer is 7. " * 61_700 + "So the answer is $\\boxed{7}$.", "7"),
        ("adv_latex", "$\\boxed{\\frac{{1}{2}\\sqrt[}{3}}$", "\\frac{1}{2}"),
    ]
    for _ in range(2):
        for form, completion, answer in adversarial:
            add("adversarial", form, completion, answer)
    malformed = ["$\\boxed{", "", "I am not sure how to solve this.", "$\\boxed{}$", "$\\frac{1}{$", "<answer></answer>", "#### "]
    while len(pairs) < size:
        roll = rng.random()
        a, b = rng.randint(1, 999), rng.randint(2, 500)
        if roll < 0.06:
            add("malformed", "malformed", rng.choice(malformed), str(a))
            continue
        if roll < 0.12:  # a GSM8K solution as the reference, a boxed answer in the completion
            total = a + b
            reference = f"She has {a} and gets {b} more: {a} + {b} = <<{a}+{b}={total}>>{total}.\n#### {total}"
            value = total if rng.random() < 0.5 else a
            add("correct" if value == total else "wrong", "gsm8k_boxed", FORMS["boxed"](value), reference)
            continue
        kind = rng.random()
        if kind < 0.7:
            gold, right, wrong = str(a), str(a), str(a + rng.choice([-2, -1, 1, 10]))
        elif kind < 0.8:
            gold, right, wrong = f"{a}.5", f"{a}.5", f"{a}.25"
        elif kind < 0.9:
            gold, right, wrong = f"$\\frac{{{a}}}{{{b}}}$", f"\\frac{{{2 * a}}}{{{2 * b}}}", f"\\frac{{{a + 1}}}{{{b}}}"
        else:
            gold, right, wrong = f"$\\frac{{\\sqrt{{{b}}}}}{{2}}$", f"\\sqrt{{{b}}}/2", f"\\sqrt{{{b + 1}}}/2"
        form = rng.choice(list(FORMS))
        correct = rng.random() < 0.5
        add("correct" if correct else "wrong", form, FORMS[form](right if correct else wrong), gold)
    return pairs


def timed(fn, completions, answers) -> tuple[list, float]:
    t0 = time.perf_counter()
    scores = []
    for start in range(0, len(completions), 64):  # TRL hands rewards one generation batch at a time
        scores += fn(completions=completions[start : start + 64], **answers(start, start + 64))
    return scores, time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_400)
    opts = parser.parse_args()
    logging.disable(logging.WARNING)
    from trl.rewards import accuracy_reward

    from grpo_ext.rewards.maths import math_accuracy

    pairs = corpus(opts.size)
    chat = [[{"role": "assistant", "content": p["completion"]}] for p in pairs]
    golds = [p["answer"] for p in pairs]
    print(
        f"corpus: {len(pairs)} pairs: "
        + ", ".join(f"{k} {v}" for k, v in collections.Counter(p["category"] for p in pairs).items())
    )
    ours, ours_s = timed(math_accuracy(), chat, lambda i, j: {"answer": golds[i:j]})
    trl, trl_s = timed(accuracy_reward, chat, lambda i, j: {"solution": golds[i:j]})

    both = [(p, o, t) for p, o, t in zip(pairs, ours, trl, strict=True) if o is not None and t is not None]
    agree = sum(o == t for _, o, t in both)
    print(
        f"verdicts: math_accuracy {sum(o is not None for o in ours)}, "
        f"trl accuracy_reward {sum(t is not None for t in trl)}, both {len(both)}"
    )
    print(f"agreement where both judge: {agree}/{len(both)} = {agree / max(len(both), 1):.4f}")
    classes = collections.defaultdict(list)
    for p, o, t in both:
        if o != t:
            classes[(p["form"], o, t)].append(p)
    unexplained = 0
    for key, members in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        reason = REASONS.get(key)
        unexplained += reason is None
        example = members[0]["completion"]
        example = example if len(example) < 90 else example[:60] + f"... ({len(example)} chars)"
        print(
            f"  disagreement {key[0]}: ours {key[1]} vs trl {key[2]}: {len(members)} pairs; "
            f"answer {members[0]['answer'][:40]!r}; "
            f"e.g. {example!r}\n    reason: {reason or 'UNEXPLAINED'}"
        )
    only_ours = collections.Counter(p["form"] for p, o, t in zip(pairs, ours, trl, strict=True) if o is not None and t is None)
    only_trl = collections.Counter(p["form"] for p, o, t in zip(pairs, ours, trl, strict=True) if o is None and t is not None)
    if only_ours or only_trl:
        print(f"  verdict from one side only: math_accuracy only {dict(only_ours)}; trl only {dict(only_trl)}")
    labelled = [(p, o, t) for p, o, t in zip(pairs, ours, trl, strict=True) if p["category"] in ("correct", "wrong")]
    for name, index in (("math_accuracy", 1), ("trl accuracy_reward", 2)):
        hits = sum(row[index] == (1.0 if row[0]["category"] == "correct" else 0.0) for row in labelled)
        print(f"{name} matches the corpus label (correct -> 1.0, wrong -> 0.0) on {hits}/{len(labelled)} labelled pairs")
    print(
        f"time: math_accuracy {ours_s:.2f} s ({len(pairs) / ours_s:.0f} pairs/s), trl accuracy_reward {trl_s:.2f} s "
        f"({len(pairs) / trl_s:.0f} pairs/s); math_accuracy is {trl_s / ours_s:.1f}x faster"
    )
    return 1 if unexplained else 0


if __name__ == "__main__":
    raise SystemExit(main())
