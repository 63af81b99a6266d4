"""GRPO variants by name (``algorithm:``): each preset's GRPOConfig keys on the oldest and the newest TRL of the
compatibility matrix, recipe keys over presets, refusals, the dry run, ``grpo-ext algorithms`` and the advice."""

import pytest
from packaging.version import Version

from grpo_ext import cli
from grpo_ext.core.errors import RecipeError
from grpo_ext.recipe import validate
from grpo_ext.settings import advice, compat, variants
from grpo_ext.verbs import train
from tests.helpers import bare_digit

OLDEST, NEWEST = "0.19.1", "1.16.0"  # the rows CI runs


@pytest.mark.parametrize(
    "name,trl,expected",
    [
        # the DeepSeekMath original on both ends; TRL before 0.22 takes scale_rewards as a bool (True = group std)
        ("grpo", OLDEST, {"loss_type": "grpo", "scale_rewards": True, "beta": 0.04}),
        ("grpo", NEWEST, {"loss_type": "grpo", "scale_rewards": "group", "beta": 0.04}),
        # Dr.GRPO: no std scaling (False before 0.22, 'none' after), constant normaliser
        ("dr_grpo", OLDEST, {"loss_type": "dr_grpo", "scale_rewards": False, "beta": 0.0}),
        ("dr_grpo", NEWEST, {"loss_type": "dr_grpo", "scale_rewards": "none", "beta": 0.0}),
        # DAPO's token-level loss only exists from 0.22: refused on 0.19, never passed as bnpo
        ("dapo", OLDEST, "algorithm: dapo needs trl>=0.22 for loss_type='dapo' (installed 0.19.1)"),
        (
            "dapo",
            NEWEST,
            {"loss_type": "dapo", "epsilon": 0.2, "epsilon_high": 0.28, "mask_truncated_completions": True, "beta": 0.0},
        ),
        # GSPO's sequence-level ratio came in 0.20
        ("gspo", OLDEST, "algorithm: gspo needs trl>=0.20 for importance_sampling_level='sequence'"),
        ("gspo", NEWEST, {"importance_sampling_level": "sequence", "loss_type": "grpo", "epsilon": 3e-4, "epsilon_high": 4e-4}),
        # bnpo is in every supported TRL
        ("bnpo", OLDEST, {"loss_type": "bnpo", "scale_rewards": True, "beta": 0.0}),
        ("bnpo", NEWEST, {"loss_type": "bnpo", "scale_rewards": "group", "beta": 0.0}),
        # CISPO and SAPO losses came in 0.26 (SAPO's temperatures with it)
        ("cispo", OLDEST, "algorithm: cispo needs trl>=0.26 for loss_type='cispo' (installed 0.19.1)"),
        ("cispo", NEWEST, {"loss_type": "cispo", "epsilon_high": 5.0}),
        ("sapo", OLDEST, "needs trl>=0.26 for loss_type='sapo', sapo_temperature_pos=1.0, sapo_temperature_neg=1.05"),
        ("sapo", NEWEST, {"loss_type": "sapo", "sapo_temperature_pos": 1.0, "sapo_temperature_neg": 1.05}),
        # GDPO's per-reward normalisation needs multi_objective_aggregation (0.27)
        ("gdpo", OLDEST, "algorithm: gdpo needs trl>=0.27 for multi_objective_aggregation='normalize_then_sum', loss_type"),
        ("gdpo", "0.26.2", "algorithm: gdpo needs trl>=0.27 for multi_objective_aggregation='normalize_then_sum' (installed"),
        ("gdpo", NEWEST, {"multi_objective_aggregation": "normalize_then_sum", "loss_type": "dapo"}),
        # LUSPO (0.28) needs the sequence-level ratio, VESPO (1.0) the token-level one; both refused on 0.19
        ("luspo", OLDEST, "needs trl>=0.28 for loss_type='luspo', importance_sampling_level='sequence' (installed 0.19.1)"),
        ("luspo", NEWEST, {"loss_type": "luspo", "importance_sampling_level": "sequence"}),
        ("vespo", "0.29.1", "algorithm: vespo needs trl>=1.0 for loss_type='vespo' (installed 0.29.1)"),
        ("vespo", NEWEST, {"loss_type": "vespo", "importance_sampling_level": "token"}),
        # TIC-GRPO's loss is grpo_ext's and reads TRL's per-token log-probabilities (0.20 on)
        ("tic_grpo", OLDEST, "algorithm: tic_grpo needs trl>=0.20 for TRL's per-token log-probabilities"),
        ("tic_grpo", NEWEST, {"loss_type": "grpo", "scale_rewards": "group", "beta": 0.0, "epsilon_high": 0.28}),
    ],
)
def test_preset_on_oldest_and_newest_trl(name, trl, expected, digit_doc):
    training = bare_digit(digit_doc)["training"]
    out, origins, problems = variants.expand(name, training, Version(trl))
    if isinstance(expected, str):
        assert len(problems) == 1 and expected in problems[0]
        assert f"run: pip install -U 'trl>={variants.needs(name)}'" in problems[0]
        return
    assert problems == [] and compat.check_training(out, Version(trl)) == []
    kwargs, _, _ = compat.translate(out, Version(trl))
    assert {k: kwargs[k] for k in expected} == expected
    assert set(origins) == set(variants.VARIANTS[name].settings)
    assert set(origins.values()) == {f"algorithm: {name}"}


@pytest.mark.parametrize(
    "top,training,values,origins",
    [
        # a key the recipe sets wins, and its origin names what the preset would have set
        (
            {"algorithm": "dr_grpo"},
            {"scale_rewards": "group"},
            {"scale_rewards": "group", "loss_type": "dr_grpo"},
            {"scale_rewards": "recipe (algorithm: dr_grpo sets 'none')"},
        ),
        # the same value as the preset: the recipe's, said to agree
        ({"algorithm": "grpo"}, {"beta": 0.04}, {"beta": 0.04}, {"beta": "recipe (the same as algorithm: grpo)"}),
        # the shipped recipe's own beta (0.0) over the original's 0.04
        (
            {"algorithm": "grpo"},
            {"beta": 0.0},
            {"beta": 0.0, "loss_type": "grpo"},
            {"beta": "recipe (algorithm: grpo sets 0.04)"},
        ),
        # no algorithm: nothing added, no origins
        ({}, {}, {"loss_type": None}, {}),
    ],
)
def test_recipe_keys_win_over_the_preset(top, training, values, origins, digit_doc):
    doc = bare_digit(digit_doc, **top)
    doc["training"].update(training)
    recipe = validate(doc)
    assert {k: recipe.training.settings.get(k) for k in values} == values
    assert {k: recipe.origins[k] for k in origins} == origins
    assert recipe.algorithm == top.get("algorithm")


@pytest.mark.parametrize(
    "algorithm,trl,message",
    [
        # a misspelt name gets a suggestion
        ("dapoo", NEWEST, "algorithm: unknown variant 'dapoo'; did you mean 'dapo'?"),
        # a variant for another kind of model is named as such
        ("flow_grpo", NEWEST, "algorithm: 'flow_grpo' cannot be run: Flow-GRPO trains image flow models"),
        # grpo_ext's own TIC-GRPO loss reads what TRL 0.19 does not have
        ("tic_grpo", OLDEST, "algorithm: tic_grpo needs trl>=0.20"),
        # the installed TRL decides: GSPO on 0.19 is refused before anything loads
        ("gspo", OLDEST, "algorithm: gspo needs trl>=0.20"),
    ],
)
def test_refused_before_loading(algorithm, trl, message, digit_doc, monkeypatch):
    monkeypatch.setattr(compat, "trl_version", lambda: Version(trl))
    with pytest.raises(RecipeError) as err:
        validate(bare_digit(digit_doc, algorithm=algorithm))
    assert any(message in line for line in err.value.lines())


def test_cli_refusal_is_one_line_and_exit_2(digit_doc, write_recipe, capsys, monkeypatch):
    monkeypatch.setattr(compat, "trl_version", lambda: Version(OLDEST))
    path = write_recipe(bare_digit(digit_doc, algorithm="dapo"))
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "algorithm: dapo needs trl>=0.22" in err[0]


@pytest.mark.parametrize("trl", [OLDEST, NEWEST])  # the same meaning on both ends of the matrix
def test_dry_run_shows_each_expanded_key_with_its_origin(trl, digit_doc, write_recipe, capsys, monkeypatch):
    monkeypatch.setattr(compat, "trl_version", lambda: Version(trl))
    doc = bare_digit(digit_doc, algorithm="dr_grpo")
    doc["training"]["beta"] = 0.001
    train.dry_run(validate(doc, write_recipe(doc)))
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert "algorithm: dr_grpo (Liu et al. 2025" in out
    assert rows["loss_type"].split()[1:] == ['"dr_grpo"', "algorithm:", "dr_grpo"]
    assert rows["scale_rewards"].split()[1] == '"none"' and "algorithm: dr_grpo" in rows["scale_rewards"]
    assert rows["beta"].split()[1:] == ["0.001", "recipe", "(algorithm:", "dr_grpo", "sets", "0.0)"]


def test_algorithms_command_lists_every_variant(capsys, monkeypatch):
    monkeypatch.setattr(compat, "trl_version", lambda: Version(OLDEST))
    assert cli.main(["algorithms"]) == 0
    out = capsys.readouterr().out
    for name in variants.VARIANTS:
        assert f"\n  {name} " in out
    assert "sets loss_type='dr_grpo', scale_rewards='none', beta=0.0" in out  # usable on 0.19
    assert "needs trl>=0.26 (installed 0.19.1); would set loss_type='cispo'" in out  # not usable there
    assert cli.main(["algorithms", "dapo"]) == 0
    out = capsys.readouterr().out
    assert "note: dynamic sampling (groups whose rewards have zero spread replaced by new prompts' groups)" in out
    assert "is in no TRL version; grpo_ext does it, on with this preset" in out


@pytest.mark.parametrize(
    "values,params,preset,expected",
    [
        # the shipped digit recipe on its 135M model: nothing to say
        ({"num_generations": 8, "beta": 0.0, "epsilon": 0.2, "learning_rate": 3e-5}, 135_000_000, set(), []),
        # a group of 2 and a huge clip range
        (
            {"num_generations": 2, "beta": 0.0, "epsilon": 0.6, "learning_rate": 1e-6},
            None,
            set(),
            ["num_generations=2 is far below", "epsilon=0.6 is far above"],
        ),
        # beta 0 is a choice; a tiny non-zero beta is advice
        (
            {"num_generations": 8, "beta": 0.001, "epsilon": 0.2, "learning_rate": 1e-6},
            None,
            set(),
            ["beta=0.001 is far below the usual 0.02-0.1"],
        ),
        # GSPO's tiny epsilon comes from its preset: not second-guessed
        ({"num_generations": 8, "beta": 0.0, "epsilon": 3e-4, "learning_rate": 1e-6}, None, {"epsilon"}, []),
        # a 7B model at a small model's learning rate
        (
            {"num_generations": 8, "beta": 0.04, "epsilon": 0.2, "learning_rate": 3e-5},
            7_000_000_000,
            set(),
            ["learning_rate=3e-05 is far above the usual 2e-07-1e-06 for a 7B model"],
        ),
        # a learning rate too small for any model
        (
            {"num_generations": 8, "beta": 0.04, "epsilon": 0.2, "learning_rate": 1e-8},
            None,
            set(),
            ["learning_rate=1e-08 is far below"],
        ),
    ],
)
def test_hyper_parameter_advice(values, params, preset, expected):
    lines = advice.check(values.get, params, preset)
    assert len(lines) == len(expected)
    for line, part in zip(lines, expected, strict=True):
        assert part in line
