"""Launch one contestant (benchmarks/contestants.py) in a fresh process, or N under accelerate, and read its result;
run any command to its end with its wall time and peak memory (``measured``)."""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measured(command: list[str], cwd: Path, label: str, env: dict | None = None) -> tuple[float, float]:
    """Run ``command`` to its end, its output thrown away: (wall seconds, peak resident GiB, the child's own from
    ``wait4``). A failure is SystemExit naming ``label``, the exit status and the last line the command wrote."""
    with tempfile.TemporaryFile("w+") as err:
        start = time.monotonic()
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        if proc.returncode != 0:
            err.seek(0)
            tail = (err.read().strip().splitlines() or ["no output"])[-1]
            raise SystemExit(f"error: {label} failed (exit {proc.returncode}): {tail}")
    return wall, usage.ru_maxrss / 2**20  # KiB on Linux


def environment(words: list[str]) -> tuple[list[str], dict[str, str]]:
    """(recipe overrides, environment variables) of a candidate's words: ``key=value`` is an override, ``NAME=VALUE``
    in capitals (``GRPO_EXT_PREFIX_ONCE=0``) a variable set for that contestant's process."""
    env = dict(w.split("=", 1) for w in words if w.split("=", 1)[0].isupper())
    return [w for w in words if w.split("=", 1)[0] not in env], env


def accelerate(processes: int | None = None) -> list[str]:
    """The command that starts a script on several CPU processes: ``accelerate launch --config_file
    configs/cpu-ddp.yaml`` (DDP over gloo), with ``--num_processes`` where given (the config says 2)."""
    found = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    count = ["--num_processes", str(processes)] if processes is not None else []
    return [found, "launch", "--config_file", str(HERE.parent / "configs" / "cpu-ddp.yaml"), *count]


def launch(name: str, max_steps: int, check_every: int = 0, extra: list[str] | None = None, processes: int = 1) -> dict:
    """One run of a contestant; its result line. With ``processes`` above 1 the run is ``accelerate launch
    --config_file configs/cpu-ddp.yaml --num_processes N`` (DDP over gloo, one thread a process): the record is the
    main process's, with ``phases`` the mean over the processes of each step's phases and ``ranks`` every process's."""
    launched = time.time()
    args = [
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
    env = None
    if processes == 1:
        cmd = [sys.executable, *args]
    else:
        cmd = [*accelerate(processes), *args]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as results:
        if env is not None:
            env["CONTESTANT_RESULTS"] = results  # each process writes its record there; their stdout lines interleave
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent, env=env, check=False)
        if env is None:
            records = [json.loads(line[len("RESULT ") :]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        else:
            records = [json.loads(f.read_text()) for f in sorted(Path(results).glob("result-*.json"))]
    if proc.returncode != 0 or len(records) < processes or not records:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"error: contestant {name!r} failed (exit {proc.returncode}): {tail}")
    records.sort(key=lambda r: r.get("rank", 0))
    record = records[0]
    if processes > 1 and "phases" in record:
        steps = min(len(r["phases"]) for r in records)
        record["phases"] = [
            {
                k: statistics.fmean(r["phases"][i].get(k, 0.0) for r in records)
                for k in {k for r in records for k in r["phases"][i]}
            }
            for i in range(steps)
        ]
        record["ranks"] = records
    record["wall"] = round(time.time() - launched, 1)
    return record
