"""Which variants give the same update when every step is on-policy: a check on the tiny local model.

    python benchmarks/on_policy.py [--variants cispo,bnpo,sapo,gspo] [--steps 3]

With one optimizer step per generation (the shipped recipes) TRL's importance ratio is exactly 1, so clip
ranges, CISPO's clipped weight, SAPO's gate and GSPO's sequence ratio should all give their base loss's
gradient. This trains the tiny random model (``grpo_ext.tiny``, built in a temporary folder) with the digit
recipe as shipped and with each variant, with the same seed, and prints each step's gradient norm and reward
next to the shipped recipe's. The tiny model never ends a completion early, so every completion has the same
length: the check separates the ratio's treatment, not token-level from sequence-level normalisation.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_ext.settings import variants  # noqa: E402


def steps(folder: Path, name: str, doc: dict) -> list[tuple[float, float]]:
    """(grad_norm, reward) of each step of one run of ``doc``."""
    recipe, out = folder / f"{name}.yaml", folder / f"run-{name}"
    recipe.write_text(yaml.safe_dump({**doc, "output_dir": str(out)}))
    subprocess.run([sys.executable, "-m", "grpo_ext", "train", str(recipe)], cwd=ROOT, check=True, capture_output=True)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [(r["grad_norm"], r["reward"]) for r in rows if "grad_norm" in r]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="cispo,bnpo,sapo,gspo")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="grpo-ext-on-policy-") as tmp:
        folder = Path(tmp)
        subprocess.run([sys.executable, "-m", "grpo_ext.tiny", str(folder / "tiny")], cwd=ROOT, check=True, capture_output=True)
        shipped = yaml.safe_load((ROOT / "recipes" / "digit.yaml").read_text())
        shipped["model"]["name"] = str(folder / "tiny")
        shipped["training"].update(max_steps=args.steps, save_strategy="no")
        shipped["eval"]["enabled"] = False
        base = steps(folder, "shipped", shipped)
        print(f"{'shipped':<8} " + "  ".join(f"grad {g:.5f} reward {r:.4f}" for g, r in base))
        for name in args.variants.split(","):
            doc = {**shipped, "algorithm": name}
            doc["training"] = {k: v for k, v in shipped["training"].items() if k not in variants.PRESET_KEYS}
            got = steps(folder, name, doc)
            same = all(abs(g - bg) <= 1e-4 * max(bg, 1e-8) and r == br for (g, r), (bg, br) in zip(got, base, strict=True))
            print(
                f"{name:<8} "
                + "  ".join(f"grad {g:.5f} reward {r:.4f}" for g, r in got)
                + f"  -> {'same as' if same else 'differs from'} shipped"
            )


if __name__ == "__main__":
    main()
