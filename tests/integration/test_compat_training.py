"""The version shim on the installed TRL with the tiny model: the seed tutorial's GRPOConfig builds a trainer, and
max_prompt_length gives TRL the same prompts on every version."""

import yaml

from grpo_ext.run import trainer
from tests.helpers import tiny_doc

SEED_TRAINING = {
    "learning_rate": 5e-6,
    "beta": 0.04,
    "max_prompt_length": 256,
    "max_completion_length": 32,
    "num_generations": 4,
    "temperature": 0.8,
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 1,
    "num_train_epochs": 1,
    "logging_steps": 10,
    "save_strategy": "no",
    "bf16": False,
}


def test_seed_config_loads_from_a_recipe(tiny_model, digit_doc, tmp_path, no_hub):
    """The seed tutorial's GRPOConfig (max_prompt_length=256, the tokenizer as processing_class) loads from a
    recipe on the installed TRL: at most one announcement per translated key, and a trainer is built."""
    from grpo_ext.recipe import load
    from grpo_ext.run import models

    doc = {**digit_doc, "training": SEED_TRAINING, "output_dir": str(tmp_path / "seed")}
    doc["model"]["name"] = str(tiny_model)
    path = tmp_path / "seed.yaml"
    path.write_text(yaml.safe_dump(doc))
    recipe = load(str(path))
    kwargs, notes, passed = trainer.config_kwargs(recipe, trainer.config_fields())
    for key in SEED_TRAINING:
        assert sum(f"training.{key}" in n for n in notes) <= 1, notes
    assert set(passed) <= {"max_prompt_length"}
    config = trainer.make_config({**kwargs, "use_cpu": True})
    assert config.beta == 0.04 and config.num_generations == 4 and config.temperature == 0.8
    assert "max_prompt_length" not in kwargs  # grpo_ext applies it to the data (see test_data_formats.py)
    model, tokenizer, _ = models.load(recipe.model, recipe.base_dir, lambda _msg: None)
    from datasets import Dataset

    grpo = trainer.make_trainer(
        model=model,
        reward_funcs=recipe.reward_funcs,
        args=config,
        tokenizer=tokenizer,
        train_dataset=Dataset.from_list([{"prompt": "Say 7."}] * 4),
    )
    assert grpo.processing_class is tokenizer


def test_max_prompt_length_gives_trl_the_same_prompts_on_every_version(tiny_model, digit_doc, tmp_path, no_hub, monkeypatch):
    """On a TRL that cuts long prompts (before 0.28) and on one that never does, the trainer gets the same rows:
    prompts over the limit are dropped by grpo_ext, and an older TRL's own limit is left with nothing to cut."""
    import grpo_ext

    short, long = [f"Say {d}." for d in range(4)], ["Say 9. " + "and then more words " * 40]
    doc = tiny_doc(digit_doc, tiny_model, tmp_path / "run", eval={"enabled": False})
    doc["data"] = {"prompts": short + long}
    doc["training"].update(max_steps=1, max_prompt_length=60)
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(doc))
    built = []
    make = trainer.make_trainer
    monkeypatch.setattr(trainer, "make_trainer", lambda **kw: built.append(make(**kw)) or built[-1])
    grpo_ext.train(tmp_path / "r.yaml")
    grpo = built[0]
    kept = [row["prompt"][-1]["content"] for row in grpo.train_dataset]
    assert sorted(kept) == sorted(short)  # the long prompt is dropped, whole prompts are kept
    tokens = []
    for row in grpo.train_dataset:
        ids = grpo.processing_class.apply_chat_template(row["prompt"], add_generation_prompt=True)
        tokens.append(len(ids["input_ids"] if hasattr(ids, "keys") else ids))  # transformers 5 returns a mapping
    limit = getattr(grpo, "max_prompt_length", None)
    assert min(tokens) > 5 and (limit is None or limit >= max(tokens))  # an older TRL's own truncation cuts nothing
