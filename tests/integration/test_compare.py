"""``grpo-ext eval``: models found by alias, path or run directory (LoRA adapters included), scored side by side."""

import json
import shutil

import pytest
import yaml

from grpo_ext import cli
from grpo_ext.verbs import evaluate as compare


@pytest.fixture
def run_dirs(tmp_path, tiny_model):
    """A run with full weights in final/, and a run whose final/ holds a LoRA adapter on the tiny model."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    full = tmp_path / "full"
    shutil.copytree(tiny_model, full / "final")
    lora = tmp_path / "lora"
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model),
        LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    model.save_pretrained(lora / "final")
    (lora / "recipe.yaml").write_text(yaml.safe_dump({"model": {"name": str(tiny_model), "dtype": "float32"}}))
    return {"full": full, "lora": lora}


def test_locate(run_dirs, tiny_model, tmp_path):
    # a catalog alias or hub id passes through
    assert compare.locate("smollm2-135m-instruct") == ("smollm2-135m-instruct", None, None)
    # a model directory is loaded as it is
    assert compare.locate(str(tiny_model)) == (str(tiny_model.resolve()), None, None)
    # a run directory: its final/
    assert compare.locate(str(run_dirs["full"])) == (str((run_dirs["full"] / "final").resolve()), None, run_dirs["full"])
    # a run with an adapter: base model from adapter_config.json, adapter from final/
    name, adapter, run = compare.locate(str(run_dirs["lora"]))
    assert (name, adapter, run) == (str(tiny_model), (run_dirs["lora"] / "final").resolve(), run_dirs["lora"])
    # an adapter whose recorded base is gone: the run's recipe.yaml names the base
    config = run_dirs["lora"] / "final" / "adapter_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "base_model_name_or_path": str(tmp_path / "moved")}))
    assert compare.locate(str(run_dirs["lora"]))[0] == str(tiny_model)


def test_eval_side_by_side(run_dirs, tiny_model, digit_doc, write_recipe, tmp_path, capsys, no_hub):
    digit_doc["model"]["name"] = str(tiny_model)
    digit_doc["data"]["eval_prompts"] = digit_doc["data"]["eval_prompts"][:3]
    digit_doc["output_dir"] = str(tmp_path / "runs" / "digit")
    recipe = write_recipe(digit_doc)
    models = [str(tiny_model), str(run_dirs["full"]), str(run_dirs["lora"])]
    argv = [
        "eval",
        str(recipe),
        *[arg for m in models for arg in ("--model", m)],
        "eval.samples=2",
        "eval.max_new_tokens=3",
        "training.bf16=false",
    ]  # bf16 is otherwise this machine's choice; tests/test_train_tiny.py covers it
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == ("eval: 3 held-out eval prompts x 2 samples, temperature 1.0, a sample passes when it scores at least 1.0")
    assert all(m in lines[1] for m in models)
    # per model: mean ±half-width, pass rate [low, high]; then pass@2 (k = samples), the other reward, lengths
    assert lines[3].split()[0] == "digit_exact" and len(lines[3].split()) == 1 + 5 * len(models)
    assert lines[4].split()[0] == "pass@2" and lines[6].split()[0] == "pass@2"
    assert lines[7].startswith("mean length (tokens)")
    # each model against the first, paired by prompt: the run with the same weights draws the very same samples
    assert f"{models[1]} vs {models[0]}, pass rate of digit_exact: no detectable difference: +0.00 [+0.00, +0.00]" in lines
    assert "samples (2 per model for the first 3 prompts):" in out
    evals = [
        line.removeprefix("grpo_ext: eval ").split(": ")[0] for line in err.splitlines() if line.startswith("grpo_ext: eval ")
    ]
    assert evals == models

    result = json.loads((tmp_path / "runs" / "eval-digit" / "eval.json").read_text())
    assert list(result["models"]) == models
    assert result["models"][models[2]]["model"].startswith("LoRA adapter")
    assert result["models"][models[1]]["model"] == f"run {run_dirs['full']} (final/)"
    for scores in result["models"].values():
        assert scores["samples"] == 6 and scores["rewards"]["digit_exact"]["judged"] == 6
    # the same seed and the same weights give the same completions
    assert result["models"][models[0]]["examples"] == result["models"][models[1]]["examples"]
    md = (tmp_path / "runs" / "eval-digit" / "eval.md").read_text()
    assert "| digit_exact |" in md and "## Sample completions" in md


@pytest.mark.parametrize(
    "model, code, message",
    [
        ("no/such-model", 1, "--model no/such-model: no such file or directory, and not loadable as a hub id"),  # typo'd path
    ],
)
def test_eval_model_not_found(model, code, message, digit_doc, write_recipe, tmp_path, capsys, no_hub):
    digit_doc["output_dir"] = str(tmp_path / "runs" / "digit")
    assert cli.main(["eval", str(write_recipe(digit_doc)), "--model", model]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and message in err[-1]
    assert not (tmp_path / "runs").exists()


def test_eval_renders_with_the_recipes_chat_template(tiny_model, digit_doc, write_recipe, tmp_path, monkeypatch, no_hub):
    """A recipe's ``model.chat_template`` renders the eval's prompts as it rendered training's."""
    from grpo_ext.results import scoring

    own = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}[assistant] "
    (tmp_path / "mine.jinja").write_text(own)
    digit_doc["model"].update(name=str(tiny_model), chat_template="mine.jinja")
    digit_doc["data"]["eval_prompts"] = digit_doc["data"]["eval_prompts"][:1]
    recipe = write_recipe(digit_doc)
    seen = []
    score_model = scoring.score_model
    monkeypatch.setattr(
        scoring,
        "score_model",
        lambda model, tokenizer, *a, **k: seen.append(tokenizer.chat_template) or score_model(model, tokenizer, *a, **k),
    )
    argv = [
        "eval",
        str(recipe),
        "--model",
        str(tiny_model),
        "--out",
        str(tmp_path / "e"),
        "eval.samples=1",
        "eval.max_new_tokens=2",
    ]
    assert cli.main(argv) == 0
    assert seen == [own]
