"""The version shim: translations, drops and refusals for the keys the seed and recipes use."""

import pytest
from packaging.version import Version

from grpo_ext import compat


@pytest.mark.parametrize("version,key,value,out_key,out_value,mark", [
    # the seed's max_prompt_length: passed where TRL has it, dropped (with a reason) where it was removed
    ("0.27.0", "max_prompt_length", 256, "max_prompt_length", 256, None),
    ("0.28.0", "max_prompt_length", 256, None, None, "dropped"),
    ("1.16.0", "max_prompt_length", 256, None, None, "dropped"),
    # scale_rewards moved from a bool to a string in 0.22
    ("1.16.0", "scale_rewards", True, "scale_rewards", "group", "translated from a bool"),
    ("1.16.0", "scale_rewards", False, "scale_rewards", "none", "translated from a bool"),
    ("0.21.0", "scale_rewards", "group", "scale_rewards", True, "translated from a string"),
    ("0.21.0", "scale_rewards", "none", "scale_rewards", False, "translated from a string"),
    ("1.16.0", "scale_rewards", "batch", "scale_rewards", "batch", None),
    # renamed keys, both directions
    ("1.16.0", "use_liger_loss", True, "use_liger_kernel", True, "translated from use_liger_loss"),
    ("0.24.0", "use_liger_loss", True, "use_liger_loss", True, None),
    ("1.16.0", "vllm_guided_decoding_regex", "\\d", "vllm_structured_outputs_regex", "\\d", "translated from vllm_guided_decoding_regex"),
    ("0.26.0", "vllm_structured_outputs_regex", "\\d", "vllm_guided_decoding_regex", "\\d", "translated from vllm_structured_outputs_regex"),
    ("1.16.0", "beta", 0.04, "beta", 0.04, None),  # passed through
])
def test_translate(version, key, value, out_key, out_value, mark):
    kwargs, notes, marks = compat.translate({key: value}, Version(version))
    if out_key is None:
        assert key not in kwargs
    else:
        assert kwargs[out_key] == out_value
    if mark is None:
        assert not notes
    else:
        assert marks[out_key or key] == mark
        assert len(notes) == 1 and key in notes[0]  # announced once, in one line


def test_drop_says_what_happens_instead():
    _, notes, _ = compat.translate({"max_prompt_length": 256}, Version("1.16.0"))
    assert "no longer truncated" in notes[0]


@pytest.mark.parametrize("version,training,expected", [
    ("0.19.0", {"importance_sampling_level": "sequence"}, "needs trl>=0.20"),  # only newer TRL has it
    ("0.21.0", {"scale_rewards": "batch"}, "'batch' needs trl>=0.22"),
    ("1.16.0", {"scale_rewards": "sometimes"}, "expected 'group', 'batch', 'none'"),
    ("1.16.0", {"not_a_key": 1}, "unknown GRPOConfig key"),
    ("0.18.0", {}, "older than grpo_ext supports"),
])
def test_check_training_refuses(version, training, expected, monkeypatch):
    monkeypatch.setattr(compat, "trl_version", lambda: Version(version))
    problems = compat.check_training(dict(training), Version(version))
    assert any(expected in p for p in problems), problems


def test_seed_config_loads_on_installed_trl():
    """The seed tutorial's GRPOConfig settings validate and translate with at most one line per key."""
    seed = {"learning_rate": 5e-6, "beta": 0.04, "max_prompt_length": 256, "max_completion_length": 32,
            "num_generations": 8, "temperature": 0.8, "per_device_train_batch_size": 2,
            "gradient_accumulation_steps": 4, "num_train_epochs": 1, "logging_steps": 10, "save_strategy": "no", "bf16": True}
    assert compat.check_training(dict(seed)) == []
    kwargs, notes, _ = compat.translate(seed)
    assert len(notes) <= 1
    config = compat.make_config({**kwargs, "output_dir": "/tmp/grpo_ext_seed", "use_cpu": True})
    assert config.num_generations == 8 and config.beta == 0.04


def test_trainer_gets_tokenizer_by_its_name():
    import inspect

    from trl import GRPOTrainer

    params = inspect.signature(GRPOTrainer.__init__).parameters
    assert "processing_class" in params or "tokenizer" in params


def test_field_table_matches_installed_trl():
    """trl_fields.json was written from an installed TRL; on that version it must match exactly."""
    import dataclasses

    from trl import GRPOConfig

    if str(compat.trl_version()) != compat.fields_version():
        pytest.skip(f"table is for trl {compat.fields_version()}, installed {compat.trl_version()}")
    assert {f.name for f in dataclasses.fields(GRPOConfig)} == set(compat.fields())
