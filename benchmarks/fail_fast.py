"""How soon a bad recipe is refused: grpo_ext vs TRL's own CLI (`trl grpo --config`), same mistake.

    python benchmarks/fail_fast.py [--repeats 3]

Each tool gets the same config with one misspelled GRPOConfig key (`learnin_rate`). Times are wall
seconds from process start to exit, medians of the repeats, alternated; the ratio is TRL / grpo_ext.
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

OURS = """model: {name: smollm2-135m-instruct}
data: {prompts: [Reply with one digit.], eval_prompts: [One digit, please.]}
rewards: [digit_exact]
training: {learnin_rate: 1.0e-5, num_generations: 8, per_device_train_batch_size: 8}
output_dir: %s/ours
"""

# TRL's CLI reads GRPOConfig, script and model keys at the top level.
THEIRS = """model_name_or_path: HuggingFaceTB/SmolLM2-135M-Instruct
dataset_name: trl-lib/DeepMath-103K
reward_funcs: [accuracy_reward]
learnin_rate: 1.0e-5
num_generations: 8
per_device_train_batch_size: 8
use_cpu: true
output_dir: %s/theirs
"""


def timed(cmd: list[str]) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or [""])[-1]
    return time.perf_counter() - t0, proc.returncode, last[:150]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    trl_cli = shutil.which("trl", path=str(Path(sys.executable).parent))
    if trl_cli is None:
        raise SystemExit("error: the `trl` command is not installed next to this Python; pip install trl")
    with tempfile.TemporaryDirectory() as tmp:
        ours_file, theirs_file = Path(tmp, "ours.yaml"), Path(tmp, "theirs.yaml")
        ours_file.write_text(OURS % tmp)
        theirs_file.write_text(THEIRS % tmp)
        ours_cmd = [sys.executable, "-m", "grpo_ext", "train", str(ours_file)]
        theirs_cmd = [trl_cli, "grpo", "--config", str(theirs_file)]
        ours, theirs = [], []
        for _ in range(args.repeats):
            ours.append(timed(ours_cmd))
            theirs.append(timed(theirs_cmd))
    o, t = statistics.median(r[0] for r in ours), statistics.median(r[0] for r in theirs)
    print(f"grpo_ext       exit {ours[0][1]}  {o:6.2f} s  {ours[0][2]}")
    print(f"trl grpo (CLI) exit {theirs[0][1]}  {t:6.2f} s  {theirs[0][2]}")
    print(f"ratio trl / grpo_ext: {t / o:.1f}x sooner with grpo_ext (median of {args.repeats}, alternated)")


if __name__ == "__main__":
    main()
