"""Launch one contestant (benchmarks/contestants.py) in a fresh process and read its result line."""

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def launch(name: str, max_steps: int, check_every: int = 0, extra: list[str] | None = None) -> dict:
    launched = time.time()
    cmd = [
        sys.executable,
        str(HERE / "contestants.py"),
        name,
        "--max-steps",
        str(max_steps),
        "--check-every",
        str(check_every),
        "--launched",
        repr(launched),
        *(extra or []),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"error: contestant {name!r} failed (exit {proc.returncode}): {tail}")
    record = json.loads(lines[-1][len("RESULT ") :])
    record["wall"] = round(time.time() - launched, 1)
    return record
