"""The version shim: translations, drops and refusals, checked against the installed TRL and against
the field tables of every TRL version in the compatibility matrix (docs/compat.md)."""

import functools

import pytest
from packaging.version import Version

from grpo_ext import cli
from grpo_ext.rewards.guard import Guarded
from grpo_ext.run import hardware
from grpo_ext.settings import compat
from tests.helpers import ROOT

OLD = {"max_prompt_length", "use_liger_loss", "vllm_guided_decoding_regex", "use_liger_kernel", "scale_rewards", "beta"}
NEW = {"use_liger_kernel", "vllm_structured_outputs_regex", "scale_rewards", "beta", "warmup_steps", "use_cpu"}


@pytest.mark.parametrize(
    "version,present,key,value,out_key,out_value,passed",
    [
        # the seed's max_prompt_length: applied by grpo_ext on every TRL (over-long prompts dropped), never passed
        ("0.27.0", OLD, "max_prompt_length", 256, None, None, "applied by grpo_ext: grpo_ext drops prompts longer"),
        ("1.16.0", NEW, "max_prompt_length", 256, None, None, "applied by grpo_ext: grpo_ext drops prompts longer"),
        # scale_rewards moved from a bool to a string in 0.22
        ("1.16.0", NEW, "scale_rewards", True, "scale_rewards", "group", 'passed as "group"'),
        ("1.16.0", NEW, "scale_rewards", False, "scale_rewards", "none", 'passed as "none"'),
        ("0.21.0", OLD, "scale_rewards", "group", "scale_rewards", True, "passed as true"),
        ("0.21.0", OLD, "scale_rewards", "none", "scale_rewards", False, "passed as false"),
        ("1.16.0", NEW, "scale_rewards", "batch", "scale_rewards", "batch", None),
        # renamed keys, both directions, decided by which name the installed GRPOConfig has
        ("1.16.0", NEW, "use_liger_loss", True, "use_liger_kernel", True, "passed as use_liger_kernel=true"),
        ("0.24.0", OLD, "use_liger_loss", True, "use_liger_loss", True, None),
        (
            "1.16.0",
            NEW,
            "vllm_guided_decoding_regex",
            "\\d",
            "vllm_structured_outputs_regex",
            "\\d",
            "passed as vllm_structured_outputs_regex",
        ),
        (
            "0.26.0",
            OLD,
            "vllm_structured_outputs_regex",
            "\\d",
            "vllm_guided_decoding_regex",
            "\\d",
            "passed as vllm_guided_decoding_regex",
        ),
        # transformers 5 folded warmup_ratio into warmup_steps (a float below 1 is a ratio)
        ("1.16.0", NEW, "warmup_ratio", 0.1, "warmup_steps", 0.1, "passed as warmup_steps=0.1"),
        # dapo arrived in 0.22; older TRL gets bnpo, the same loss with one process and one step
        ("0.19.1", OLD, "loss_type", "dapo", "loss_type", "bnpo", 'passed as "bnpo"'),
        ("0.22.0", OLD, "loss_type", "dapo", "loss_type", "dapo", None),
        # a newer key at the value older versions behave as: dropped (announced) where missing, passed where present
        ("0.19.1", OLD, "use_bias_correction_kl", False, None, None, "dropped: TRL before 0.26"),
        ("1.16.0", NEW | {"use_bias_correction_kl"}, "use_bias_correction_kl", False, "use_bias_correction_kl", False, None),
        ("1.16.0", NEW, "beta", 0.04, "beta", 0.04, None),  # passed through
    ],
)
def test_translate(version, present, key, value, out_key, out_value, passed):
    kwargs, notes, how = compat.translate({key: value}, Version(version), present)
    if out_key is None:
        assert key not in kwargs
    else:
        assert kwargs[out_key] == out_value
    if passed is None:
        assert not notes and key not in how
    else:
        assert how[key].startswith(passed)
        announced = 0 if key in compat.APPLIED else 1  # an applied key is announced where the data loads
        assert len(notes) == announced and all(key in n and "\n" not in n for n in notes)  # once, in one line


@pytest.mark.parametrize(
    "version,training,expected",
    [
        ("0.19.0", {"importance_sampling_level": "sequence"}, "needs trl>=0.20"),  # only newer TRL has the key
        ("0.25.0", {"log_multimodal": True}, "needs trl>=1.9 (installed 0.25.0)"),  # likewise, far newer
        ("0.25.0", {"use_bias_correction_kl": True}, "needs trl>=0.26"),  # a newer key at a value older TRL cannot mean
        ("0.21.0", {"scale_rewards": "batch"}, "'batch' needs trl>=0.22"),  # only newer TRL has the value
        ("0.27.0", {"loss_type": "luspo"}, "'luspo' needs trl>=0.28"),
        ("1.16.0", {"scale_rewards": "sometimes"}, "expected 'group', 'batch', 'none'"),
        ("1.16.0", {"not_a_key": 1}, "unknown GRPOConfig key"),  # in no version
        ("1.16.0", {"max_complection_length": 8}, "did you mean 'max_completion_length'?"),
        ("1.16.0", {"vllm_device": "cuda:1"}, "removed in trl 0.18"),
        ("0.18.0", {}, "older than grpo_ext supports; run: pip install -U 'trl>=0.19'"),
    ],
)
def test_check_training_refuses(version, training, expected, monkeypatch):
    monkeypatch.setattr(compat, "trl_version", lambda: Version(version))
    problems = compat.check_training(dict(training), Version(version))
    assert any(expected in p for p in problems), problems
    assert all("\n" not in p for p in problems)


@pytest.mark.parametrize(
    "version,training",
    [
        ("0.19.1", {"loss_type": "dapo", "scale_rewards": "group", "max_prompt_length": 256}),  # translated on the oldest
        ("1.16.0", {"loss_type": "dapo", "scale_rewards": True, "max_prompt_length": 256}),  # translated or dropped on the newest
        (
            "0.26.0",
            {"vllm_structured_outputs_regex": "\\d"},
        ),  # a new name the older TRL knows by its old name
        ("0.19.1", {"use_bias_correction_kl": False}),  # a newer key at the value older TRL always behaves as
    ],
)
def test_check_training_accepts(version, training, monkeypatch):
    monkeypatch.setattr(compat, "trl_version", lambda: Version(version))
    assert compat.check_training(dict(training), Version(version)) == []


@pytest.mark.parametrize("key,first", sorted(compat.ADDED.items()))
def test_added_matches_field_tables(key, first):
    """Each key TRL added is missing from every table older than its version and present from then on."""
    for v, table in compat.tables().items():
        assert (key in table["fields"]) == (v >= Version(first)), f"{key} in trl {v}"


def test_a_table_is_named_by_its_version():
    """A field table's file is named by the TRL version it was written on: the installed version's table is found
    by its name, without reading the others."""
    assert [str(v) for v in compat.versions()] == [t["trl"] for t in compat.tables().values()]


@pytest.mark.parametrize(
    "training,read",
    [
        ({"learning_rate": 1e-5, "beta": 0.0}, "installed"),  # keys of the installed TRL's table: that table alone
        ({"vllm_dtype": "auto", "output_dir": "x"}, "installed"),  # keys refused by their own rules
        ({"use_liger_loss": True}, "newest with it"),  # a renamed key, known by the rules; its kinds from a table that has it
        ({"learnin_rate": 1}, "all"),  # an unknown key: every table, for the nearest name of any version
        ({"adafactor": True}, "all"),  # a key only older versions have: every table, to say so
    ],
)
def test_check_training_reads_the_installed_table_alone(training, read, monkeypatch):
    """A recipe's ``training:`` keys are checked against the installed TRL's field table and the version rules; the
    other versions' tables are read only for a key those lack, as far as its message or its kinds need them."""
    installed, every = compat.trl_version(), list(compat.versions())
    reads = []
    unread = compat.read_table.__wrapped__
    monkeypatch.setattr(compat, "read_table", functools.cache(lambda v: reads.append(v) or unread(v)))
    for cached in (compat.tables, compat.known_keys):  # fresh caches, so that what this check reads is counted
        monkeypatch.setattr(compat, cached.__name__, functools.cache(cached.__wrapped__))
    compat.check_training(dict(training))
    expected = {installed} if read == "installed" else set(every)
    if all(key in unread(installed)["fields"] for key in training):  # an older TRL has the key: its own table tells
        expected = {installed}
    elif read == "newest with it":
        newest = max(v for v in every if all(key in unread(v)["fields"] for key in training))
        expected = {installed, *[v for v in every if v >= newest]}
    assert sorted(reads) == sorted(expected)


@pytest.mark.parametrize("key", ["max_prompt_length", "use_liger_loss", "vllm_guided_decoding_regex", "wandb_log_unique_prompts"])
def test_removed_trl_keys_match_field_tables(key):
    """The keys TRL removed exist in the oldest table and not in the newest."""
    tables = list(compat.tables().values())
    assert key in tables[0]["fields"] and key not in tables[-1]["fields"]


@pytest.mark.parametrize("key", sorted(compat.MOVED_DEFAULTS))
def test_moved_defaults_are_set_by_the_digit_recipe(key, digit_doc):
    """The shipped recipe (or grpo_ext) sets every key whose TRL default moved, where the key is in every version."""
    in_all = all(key in t["fields"] for t in compat.tables().values())
    assert not in_all or key in digit_doc["training"] or key in compat.OUR_DEFAULTS


@pytest.mark.parametrize(
    "transformers,expected",
    [
        ("4.53.3", "torch_dtype"),  # before 4.56 from_pretrained takes torch_dtype
        ("4.56.0", "dtype"),
        ("5.24.0", "dtype"),
    ],
)
def test_dtype_keyword(transformers, expected, monkeypatch):
    monkeypatch.setattr(compat, "transformers_version", lambda: Version(transformers))
    assert list(compat.dtype_kwargs("float32")) == [expected]


def strict_reward(completions, solution):
    """A user's reward that names only what it uses (no **kwargs)."""
    return [float(str(s) in str(c)) for c, s in zip(completions, solution, strict=True)]


def open_reward(completions, **kwargs):
    return [float(len(kwargs)) for _ in completions]


@pytest.mark.parametrize(
    "fn,extra,expected",
    [
        # 0.19 passes completion_ids; a strict reward gets only what it names
        (strict_reward, {"completion_ids": [[1], [2]]}, [1.0, 0.0]),
        # 0.20 adds trainer_state; 1.0 adds log_extra and log_metric
        (
            strict_reward,
            {"completion_ids": [[1], [2]], "trainer_state": None, "log_extra": print, "log_metric": print},
            [1.0, 0.0],
        ),
        # a reward with **kwargs gets everything (prompts, solution and the version's extras)
        (open_reward, {"completion_ids": [[1], [2]], "trainer_state": None}, [4.0, 4.0]),
    ],
)
@pytest.mark.parametrize("chat", [False, True])
def test_rewards_take_what_each_version_passes(fn, extra, expected, chat):
    completions = ["7", "x"] if not chat else [[{"role": "assistant", "content": "7"}], [{"role": "assistant", "content": "x"}]]
    reward = Guarded(fn, fn.__name__)
    assert reward(prompts=["p", "p"], completions=completions, solution=["7", "7"], **extra) == expected


@pytest.mark.parametrize(
    "version,override,expected",
    [
        ("0.25.0", "training.log_multimodal=true", "training.log_multimodal: needs trl>=1.9"),  # only in a newer TRL
        ("0.21.0", "training.loss_type=cispo", "training.loss_type: 'cispo' needs trl>=0.26"),  # a value only newer TRL has
        ("1.16.0", "training.log_multimodl=true", "did you mean 'log_multimodal'?"),  # in no TRL version
    ],
)
def test_bad_key_exits_2_with_one_line(version, override, expected, monkeypatch, capsys):
    monkeypatch.setattr(compat, "trl_version", lambda: Version(version))
    assert cli.main(["train", str(ROOT / "recipes" / "digit.yaml"), override, "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and expected in err[0], err


CPUINFO = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse2 avx2 {extra}\nbogomips\t: 4000\n"


@pytest.mark.parametrize(
    "extra, expected",
    [
        ("avx512f avx512_bf16", "avx512_bf16"),
        ("amx_tile amx_bf16", "amx_bf16"),
        ("avx512f avx512_vnni", None),  # AVX-512 alone emulates bf16: slower, not chosen
        ("avx512_bf16x", None),  # whole flags only
    ],
)
def test_cpu_bf16_reads_the_flags(extra, expected):
    assert hardware.cpu_bf16(CPUINFO.format(extra=extra)) == expected


def test_cpu_bf16_without_flags_line_is_none():
    assert hardware.cpu_bf16("Processor\t: AArch64\nFeatures\t: fp asimd\n") is None


@pytest.mark.parametrize(
    "given, cuda, gpu_bf16, cpu_flag, quantized, expected",
    [
        ({}, False, False, "avx512_bf16", False, True),  # CPU with native bf16: autocast
        ({}, False, False, None, False, False),  # CPU without it: float32
        ({}, False, False, "avx512_bf16", True, False),  # 4-bit on the CPU computes in float32
        ({}, True, True, None, False, True),
        ({}, True, False, "avx512_bf16", False, False),  # an old GPU: the CPU flag does not matter
        ({"bf16": False}, False, False, "avx512_bf16", False, False),  # the recipe decides
        ({"fp16": True}, True, False, None, False, None),
    ],
)
def test_hardware_defaults_bf16(given, cuda, gpu_bf16, cpu_flag, quantized, expected):
    kwargs = dict(given)
    notes = hardware.hardware_defaults(kwargs, cuda, gpu_bf16, cpu_flag, quantized)
    assert kwargs.get("bf16") == expected
    assert kwargs.get("use_cpu", False) is (not cuda)
    if "bf16" not in given and "fp16" not in given:
        assert any(n.startswith(f"bf16={expected}") for n in notes)
