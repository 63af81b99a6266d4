"""benchmarks/seeds.py: one tiny sweep end to end (two seeds, one candidate), then benchmarks/health.py on what it kept."""

import json

import yaml

from tests.helpers import bench


def test_tiny_sweep(tiny_model, digit_doc, tmp_path):
    digit_doc["model"]["name"] = str(tiny_model)
    digit_doc["training"].update(max_steps=1, per_device_train_batch_size=4, num_generations=4, max_completion_length=2)
    digit_doc["data"]["eval_prompts"] = digit_doc["data"]["eval_prompts"][:1]
    digit_doc["eval"]["samples"] = 2
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(digit_doc))
    proc = bench(
        "seeds.py",
        *["--recipe", str(recipe), "--seeds", "0-1", "--candidate", "two: training.max_steps=2", "--solved", "0.0"],
        *["--keep", str(tmp_path / "kept"), "--log", str(tmp_path / "runs.jsonl")],
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # each run says where its output goes before it starts, and its log holds the run's own lines
    assert [line.split("its output: ")[1] for line in proc.stderr.splitlines() if line.startswith("seeds: training seed ")] == [
        str(tmp_path / "kept" / label / f"seed-{seed}.log")
        for seed, label in ((0, "shipped"), (0, "two"), (1, "two"), (1, "shipped"))
    ]
    lines = proc.stdout.splitlines()
    runs = [line.split()[:3] for line in lines if line.startswith("seed ")]
    assert runs == [["seed", "0", "shipped"], ["seed", "0", "two"], ["seed", "1", "two"], ["seed", "1", "shipped"]]
    assert any(line.startswith("shipped ") and "solved 2/2 seeds" in line for line in lines)  # --solved 0: every run counts
    assert any(line.startswith("two ") and "[training.max_steps=2]" in line for line in lines)
    assert [line for line in lines if "2 steps" in line and line.startswith("seed ")] == [
        line for line in lines if line.startswith("seed ") and " two " in line
    ]
    # a 95% interval over the 2 seeds for the share solved; the candidate compared seed by seed
    assert any(line.startswith("shipped ") and "solved 2/2 seeds [" in line for line in lines)
    assert any(line.startswith("two vs shipped, mean pass rate on the same seeds: ") for line in lines)
    assert any(line.startswith("two after vs before training, mean pass rate on the same seeds: ") for line in lines)
    assert all(" pass rate before 0" in line for line in lines if line.startswith("seed "))  # the run's eval before
    assert lines[-1].startswith("ratio two/shipped: seeds solved 1.00, wall ")
    # the log: each run once; started again with it nothing runs again, and the log alone gives the same comparison
    logged = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert [(r["label"], r["seed"]) for r in logged] == [("shipped", 0), ("two", 0), ("two", 1), ("shipped", 1)]
    again = bench(
        "seeds.py",
        *["--recipe", str(recipe), "--seeds", "0-1", "--candidate", "two: training.max_steps=2"],
        *["--solved", "0.0", "--log", str(tmp_path / "runs.jsonl")],
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert [line.endswith("(from the log)") for line in again.stdout.splitlines() if line.startswith("seed ")] == [True] * 4
    summary = [line for line in lines if not line.startswith("seed ")]
    assert [line for line in again.stdout.splitlines() if not line.startswith("seed ")] == summary
    table = bench("seeds.py", "--table-from", str(tmp_path / "runs.jsonl"), "--solved", "0.0")
    assert table.stdout.splitlines() == summary, table.stderr[-2000:]
    # a recipe whose comments changed still says the same: its runs are read back; one whose settings changed is
    # another contestant under the same label: its runs are made again
    one_seed = ("seeds.py", "--recipe", str(recipe), "--seeds", "0", "--solved", "0.0", "--log", str(tmp_path / "runs.jsonl"))
    digit_doc["eval"]["samples"] = 1
    for text, logged in ((recipe.read_text() + "# a comment\n", True), (yaml.safe_dump(digit_doc), False)):
        recipe.write_text(text)
        edited = bench(*one_seed)
        assert edited.returncode == 0, edited.stderr[-2000:]
        assert [line.endswith("(from the log)") for line in edited.stdout.splitlines() if line.startswith("seed ")] == [logged]
    # --keep leaves each run where benchmarks/health.py reads it, without the trained model
    for label in ("shipped", "two"):
        for seed in (0, 1):
            assert (tmp_path / "kept" / label / f"seed-{seed}" / "summary.json").is_file()
            assert not (tmp_path / "kept" / label / f"seed-{seed}" / "final").exists()
            assert "grpo_ext: done in" in (tmp_path / "kept" / label / f"seed-{seed}.log").read_text()
    tally = bench("health.py", "--tally-only", "--out", str(tmp_path / "kept" / "two"), "--seeds", "0-1", "--solved", "0.0")
    assert tally.returncode == 0, tally.stderr[-2000:]
    out = tally.stdout.splitlines()
    tallied = [line.split()[:2] for line in out if line.startswith("seed ") and "pass rate" in line]
    assert tallied == [["seed", "0"], ["seed", "1"]]
    live = [line for line in out if line.startswith("watchdog live: ")]
    assert len(live) == 1 and "over 2 runs: ratio with/without 1.0" in live[0], out
