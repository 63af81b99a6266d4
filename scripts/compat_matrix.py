"""Compatibility matrix: install each supported TRL version, test grpo_ext on it, write docs/compat.md.

For each row: a plain venv under .compat/venvs/ (kept and reused while its pins match), pip install of
torch==2.13.0 (the CPU build), the row's trl and transformers, and grpo_ext with its test extras; then
the field table (grpo_ext/settings/trl_fields/<trl>.json), the compatibility and algorithm tests (TESTS), a
2-step training of the tiny local model through `grpo-ext train`, 2 steps of the real model from the
shared cache (~/.cache/grpo_ext; each transformers family converts its own entry), and dry runs of the digit
recipe and of the digit recipe with `algorithm: dr_grpo` deciding its variant keys, whose effective values must
equal the newest row's (for keys both versions have).

    python scripts/compat_matrix.py                 # every row; writes docs/compat.md
    python scripts/compat_matrix.py --only 0.19.1   # one row (CI runs the oldest); docs untouched

Rows run one after another: installs are network and disk bound. Exit status 1 if any row fails.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_ext.settings import variants  # noqa: E402

# A variant every supported TRL has: its dry run must mean the same on every row.
ALGORITHM = "dr_grpo"
VENVS = ROOT / ".compat" / "venvs"

# (trl, transformers): each TRL minor with a transformers release it supports.
MATRIX = [
    ("0.19.1", "4.53.3"),
    ("0.20.0", "4.55.4"),
    ("0.22.2", "4.56.2"),
    ("0.24.0", "4.57.6"),
    ("0.26.2", "4.57.6"),
    ("0.28.0", "4.57.6"),
    ("0.29.1", "4.57.6"),
    ("1.0.0", "5.3.0"),
    ("1.8.0", "5.8.1"),
    ("1.16.0", "5.25.0"),
]

# The tests each row runs: the version shim, TRL's internals behind their fence and the GRPO variants, without a model
# and on the tiny one.
TESTS = [
    "tests/unit/test_compat.py",
    "tests/integration/test_compat_training.py",
    "tests/unit/test_trl_internals.py",
    "tests/integration/test_installed_trl.py",
    "tests/integration/test_behaviour_hooks.py",
    "tests/unit/test_algorithms.py",
    "tests/integration/test_algorithms_training.py",
]

REAL_OVERRIDES = ["training.max_steps=2", "training.save_strategy='no'", "eval.enabled=false"]

TINY_OVERRIDES = [
    "training.max_steps=2",
    "training.per_device_train_batch_size=4",
    "training.num_generations=4",
    "training.max_completion_length=4",
    "training.save_strategy='no'",
    "eval.samples=2",
]


def sh(cmd: list[str], log: Path, timeout: int = 900) -> tuple[bool, str]:
    """Run a command from the repository root, append its output to ``log``; (ok, output)."""
    with open(log, "a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        try:
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            fh.write(f"timed out after {timeout} s\n")
            return False, ""
        fh.write(proc.stdout + proc.stderr + f"exit {proc.returncode}\n")
    return proc.returncode == 0, proc.stdout + proc.stderr


def install(trl: str, transformers: str, log: Path) -> tuple[Path, bool]:
    venv = VENVS / f"trl-{trl}"
    spec = f"torch==2.13.0 trl=={trl} transformers=={transformers}"
    marker = venv / "grpo_ext-pins.txt"
    if marker.exists() and marker.read_text() == spec:
        return venv / "bin" / "python", True
    ok, _ = sh([sys.executable, "-m", "venv", "--clear", str(venv)], log)
    ok = (
        ok
        and sh([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *spec.split(), "-e", ".[test]"], log)[
            0
        ]
    )
    if ok:
        marker.write_text(spec)
    return venv / "bin" / "python", ok


def dry_run_values(output: str) -> dict[str, str]:
    """key → printed value from a dry run's effective GRPOConfig block (keys the version has)."""
    values, inside = {}, False
    for line in output.splitlines():
        if "effective GRPOConfig" in line:
            inside = True
        elif inside and line.startswith("  ") and not line.startswith("  use_cpu, bf16"):
            key, rest = line[2:34].strip(), line[34:].strip()
            value, _, origin = rest.partition("  ")
            if not origin.strip().startswith("not in trl"):
                values[key] = value
        elif inside:
            inside = line.startswith("  ")
    return values


def algorithm_recipe(folder: Path) -> Path:
    """The digit recipe with the keys a preset sets left to ``algorithm: ALGORITHM``."""
    doc = yaml.safe_load((ROOT / "recipes" / "digit.yaml").read_text())
    doc["training"] = {k: v for k, v in doc["training"].items() if k not in variants.PRESET_KEYS}
    doc["algorithm"] = ALGORITHM
    path = folder / f"digit-{ALGORITHM}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def two_steps(ok: bool, run_dir: Path, started: float) -> str:
    """'2 steps in N s' for a run that completed its two steps, else why not."""
    done = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else {}
    if ok and done.get("status") == "completed" and done.get("steps") == 2:
        return f"2 steps in {time.monotonic() - started:.0f} s"
    return f"failed ({done.get('error', 'see log')[:60]})"


def run_row(trl: str, transformers: str, logs: Path) -> dict:
    log = logs / f"trl-{trl}.log"
    log.write_text("")
    row = {"trl": trl, "transformers": transformers, "install": "failed", "tests": "-", "train": "-", "real": "-", "dry_run": {}}
    t0 = time.monotonic()
    python, ok = install(trl, transformers, log)
    row["install_s"] = round(time.monotonic() - t0)
    if not ok:
        return row
    row["install"] = "ok"
    sh([str(python), "scripts/trl_fields.py"], log)
    ok, out = sh([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS], log)
    summary = [line for line in out.splitlines() if " passed" in line or " failed" in line or " error" in line]
    row["tests"] = (summary[-1].strip("= ").split(" in ")[0] if summary else "no result") + ("" if ok else " (FAILED)")
    with tempfile.TemporaryDirectory(prefix="grpo_ext_matrix_") as tmp:
        tiny = Path(tmp) / "tiny"
        run_dir = Path(tmp) / "run"
        ok = sh([str(python), "-m", "grpo_ext.tiny", str(tiny)], log)[0]
        t1 = time.monotonic()
        ok = (
            ok
            and sh(
                [
                    str(python),
                    "-m",
                    "grpo_ext",
                    "train",
                    "recipes/digit.yaml",
                    f"model.name={tiny}",
                    f"output_dir={run_dir}",
                    *TINY_OVERRIDES,
                ],
                log,
            )[0]
        )
        row["train"] = two_steps(ok, run_dir, t1)
        # the real model from the shared cache (~/.cache/grpo_ext): this transformers family's own conversion
        t2, real_dir = time.monotonic(), Path(tmp) / "real"
        ok = sh([str(python), "-m", "grpo_ext", "train", "recipes/digit.yaml", f"output_dir={real_dir}", *REAL_OVERRIDES], log)[0]
        row["real"] = two_steps(ok, real_dir, t2)
    ok, out = sh([str(python), "-m", "grpo_ext", "train", "recipes/digit.yaml", "--dry-run"], log)
    row["dry_run"] = dry_run_values(out) if ok else {}
    with tempfile.TemporaryDirectory(prefix="grpo_ext_matrix_") as tmp:
        ok, out = sh([str(python), "-m", "grpo_ext", "train", str(algorithm_recipe(Path(tmp))), "--dry-run"], log)
    row["algorithm_dry_run"] = dry_run_values(out) if ok else {}
    return row


def compare(values: dict[str, str], newest: dict[str, str]) -> tuple[str, list[str]]:
    """A dry run's values against the newest row's, for the keys both have: (cell text, keys that differ)."""
    same = [k for k in values if k in newest]
    differ = [k for k in same if values[k] != newest[k]]
    if not values:
        return "no output", differ
    return (f"{len(same)} keys identical" if not differ else f"differs: {', '.join(differ)}"), differ


def write_doc(rows: list[dict], path: Path) -> None:
    lines = [
        "# Compatibility matrix",
        "",
        "Written by `python scripts/compat_matrix.py` (do not edit by hand). Each row installs `torch==2.13.0` (CPU),",
        "the row's trl and transformers and grpo_ext in a fresh venv, then runs the compatibility and algorithm tests",
        f"({', '.join(f'`{t}`' for t in TESTS)}), a 2-step",
        "training of the tiny local model (`grpo_ext.tiny`) through `grpo-ext train recipes/digit.yaml`, the same",
        "2 steps on the real SmolLM2 model from the shared cache (each transformers family converts its own), and",
        "`--dry-run` of `recipes/digit.yaml`. *Dry run* compares the effective GRPOConfig values it prints with those",
        f"of trl {rows[-1]['trl']}, for the keys both versions have; *{ALGORITHM} dry run* does the same for the digit",
        f"recipe whose variant keys `algorithm: {ALGORITHM}` decides. CI runs the oldest and the newest row.",
        "",
        f"| trl | transformers | tests | tiny training | real model | dry run vs newest | {ALGORITHM} dry run | result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        dry, differ = compare(row["dry_run"], rows[-1]["dry_run"])
        preset, preset_differ = compare(row.get("algorithm_dry_run", {}), rows[-1].get("algorithm_dry_run", {}))
        green = (
            row["install"] == "ok"
            and "FAILED" not in row["tests"]
            and "failed" not in row["tests"]
            and row["train"].startswith("2 steps")
            and row["real"].startswith("2 steps")
            and row["dry_run"]
            and row.get("algorithm_dry_run")
            and not differ
            and not preset_differ
        )
        row["green"] = bool(green)
        tests = row["tests"] if row["install"] == "ok" else "install failed"
        lines.append(
            f"| {row['trl']} | {row['transformers']} | {tests} | {row['train']} | {row['real']} | {dry} | {preset} "
            f"| {'pass' if green else 'FAIL'} |"
        )
    lines += ["", f"Logs of the last run: `.compat/logs/` (not committed). Python {sys.version.split()[0]}.", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", metavar="TRL", help="run these trl versions of the matrix; docs/compat.md is not written")
    args = p.parse_args(argv)
    rows_to_run = [r for r in MATRIX if not args.only or r[0] in args.only]
    if not rows_to_run:
        print(
            f"error: --only {' '.join(args.only)}: not in the matrix; choose from {', '.join(r[0] for r in MATRIX)}",
            file=sys.stderr,
        )
        return 2
    logs = ROOT / ".compat" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    rows = []
    for trl, transformers in rows_to_run:
        row = run_row(trl, transformers, logs)
        rows.append(row)
        print(
            f"trl {trl} / transformers {transformers}: install {row['install']} ({row['install_s']} s), "
            f"tests {row['tests']}, training {row['train']}, real model {row['real']}",
            flush=True,
        )
    trained = [r for r in rows if r["train"].startswith("2 steps") and r["real"].startswith("2 steps")]
    failed = [r["trl"] for r in rows if r["install"] != "ok" or "FAILED" in r["tests"] or r not in trained]
    if not args.only:
        write_doc(rows, ROOT / "docs" / "compat.md")
        failed += [r["trl"] for r in rows if not r["green"] and r["trl"] not in failed]
        print(f"wrote {ROOT / 'docs' / 'compat.md'}")
    if failed:
        print(f"failed: trl {', '.join(failed)}; logs in {logs}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
