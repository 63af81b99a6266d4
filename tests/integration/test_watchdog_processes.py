"""The health checks on two processes (CPU DDP over gloo, launched as a run is: accelerate launch with
configs/cpu-ddp.yaml): a finding that stops the run stops every process at the same step, the user reads its error
line once (from the main process; the other says it stopped with it), the main process writes one summary, and the
launch ends at once rather than with a process left waiting in a collective."""

import json
import time

import pytest
import yaml

from tests.helpers import tiny_doc
from tests.integration.test_row_skipping_processes import launch

CASES = [
    # (health settings, steps trained, what the one error line says): a random tiny model never writes one lone
    # digit, so digit_exact alone gives no signal: the pre-flight sees it before step 1, the watchdog at step 1
    ({"preflight": "fail", "preflight_prompts": 2}, 0, "digit_exact scored 0 on all"),
    ({"preflight": "off", "on_problem": "stop", "no_signal_steps": 1}, 1, "health.on_problem: stop"),
]


@pytest.mark.parametrize(("health", "steps", "said"), CASES)
def test_a_stop_finding_stops_both_processes_alike(health, steps, said, digit_doc, tiny_model, tmp_path):
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run", health=health, rewards=["digit_exact"], eval={"enabled": False})
    doc["training"]["max_steps"] = 4
    path = tmp_path / "stop.yaml"
    path.write_text(yaml.safe_dump(doc))
    t0 = time.monotonic()
    proc = launch("-m", "grpo_ext.train", str(path), timeout=300)
    took = time.monotonic() - t0
    assert proc.returncode != 0, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and said in errors[0], proc.stderr[-3000:]  # twice before: each process said it
    assert "grpo_ext: stopped with the main process by the run's health checks; its error line says why" in proc.stderr
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["status"] == "stopped_unhealthy" and summary["steps"] == steps
    logged = (run / "metrics.jsonl").read_text().splitlines() if (run / "metrics.jsonl").exists() else []
    assert [json.loads(line)["step"] for line in logged] == list(range(1, steps + 1))
    if steps:
        assert [f["rule"] for f in summary["health"]["findings"]] == ["no_signal"]
        assert (run / f"checkpoint-{steps}" / "grpo_ext_complete.json").is_file()
    assert took < 120, f"the launch took {took:.0f} s to end"  # no process left in a collective until the timeout
