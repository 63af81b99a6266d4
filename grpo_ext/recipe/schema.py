"""Every recipe key: the YAML kinds it accepts, its default, its allowed values and its one line of documentation.
Validation, the JSON Schema (``grpo-ext schema``) and the docs' key reference are all read from here.
"""

from dataclasses import dataclass

from grpo_ext.rewards.guard import ON_ERROR
from grpo_ext.settings.limits import MAX_BATCH, MAX_ROUNDS, MAX_ROWS, MAX_STEPS, MAX_TOKENS

MAX_RECIPE_BYTES = 1_000_000


@dataclass(frozen=True)
class Spec:
    """One recipe key: the YAML kinds it accepts, its default, and (optionally) the values allowed."""

    kinds: tuple[str, ...]
    default: object = None
    choices: tuple[object, ...] | None = None
    required: bool = False
    minimum: float | None = None
    maximum: float | None = None
    doc: str = ""


SCHEMA: dict[str, dict[str, Spec]] = {
    "model": {
        "name": Spec(("str",), required=True, doc="catalog alias, hub id, local directory or .gguf file"),
        "dtype": Spec(
            ("str",),
            "auto",
            ("auto", "float32", "bfloat16", "float16"),
            doc="weights dtype; auto: float32 on CPU, bf16 on a GPU that has it",
        ),
        "trust_remote_code": Spec(("bool",), False, doc="run model code from the hub repository (off unless you trust it)"),
        "revision": Spec(("str", "null"), None, doc="hub branch, tag or commit"),
        "lora": Spec(
            ("dict", "bool", "null"),
            None,
            doc="peft LoraConfig keys (r, lora_alpha, target_modules, ...); true: r=16, alpha=32, all-linear",
        ),
        "quantization": Spec(
            ("str", "null"),
            None,
            ("4bit", "8bit", None),
            doc="load the base in 4-bit NF4 (QLoRA) or 8-bit with bitsandbytes; needs lora",
        ),
        "chat_template": Spec(
            ("str", "null"),
            None,
            doc="a Jinja chat template file (relative to the recipe) in place of the model's; with tools it must render them",
        ),
    },
    "data": {
        "prompts": Spec(("list", "null"), None, doc="training prompts, one string each"),
        "file": Spec(
            ("str", "null"),
            None,
            doc=".jsonl, .json, .csv, .parquet or a save_to_disk folder with a prompt column (relative to the recipe)",
        ),
        "prompt_column": Spec(("str",), "prompt", doc="column holding each prompt: text or a list of chat messages"),
        "prompt_template": Spec(
            ("str", "null"), None, doc="build each prompt from columns instead: 'Question: {question}\\nAnswer:'"
        ),
        "system_prompt": Spec(("str", "null"), None, doc="system message put before every prompt in chat format"),
        "examples": Spec(
            ("list", "null"),
            None,
            doc="worked chat turns put before every prompt in chat format (after the system prompt); may hold tool calls",
        ),
        "chat": Spec(
            ("str", "bool"),
            "auto",
            ("auto", True, False),
            doc="format prompts as chat messages; auto: when the tokenizer has a chat template",
        ),
        "eval_prompts": Spec(
            ("list", "null"), None, doc="held-out prompts scored before and after training: strings or {prompt: ..., answer: ...}"
        ),
        "eval_file": Spec(("str", "null"), None, doc="held-out rows from a file (same formats as file)"),
        "source": Spec(
            ("str", "null"),
            None,
            doc="a built-in generator of rows: arith (word problems), guess (guess_number games), verifiers (a taskset of the "
            "verifiers library, with its rewards)",
        ),
        "source_args": Spec(
            ("dict",),
            {},
            doc="keyword arguments for the generator; verifiers: taskset (module:function), args, eval_args, held_out",
        ),
        "hub": Spec(("str", "null"), None, doc="a Hugging Face Hub dataset id (org/name)"),
        "hub_config": Spec(("str", "null"), None, doc="the hub dataset's configuration name"),
        "hub_split": Spec(("str",), "train", doc="split to train on, of a hub dataset or a saved DatasetDict"),
        "eval_split": Spec(("str", "null"), None, doc="held-out split of the hub dataset or the saved DatasetDict"),
        "eval_size": Spec(
            ("int", "null"),
            None,
            minimum=1,
            maximum=MAX_ROWS,
            doc="eval rows: the first N of eval_file/eval_split; without them, N training rows held out; null: all",
        ),
        "eval_fraction": Spec(("float", "null"), None, doc="hold out this share (0 to 1) of the training rows for eval"),
        "mixture": Spec(
            ("list", "null"),
            None,
            doc="train on several sources: a list of data: sections (file, source, hub or prompts), each with weight or rows",
        ),
        "size": Spec(
            ("int", "null"),
            None,
            minimum=1,
            maximum=MAX_ROWS,
            doc="a mixture's training rows in all, shared by weight; null: the most the weights take without repeating a row",
        ),
    },
    "eval": {
        "enabled": Spec(("bool",), True, doc="score eval_prompts before and after training"),
        "samples": Spec(("int",), 8, minimum=1, maximum=MAX_BATCH, doc="completions sampled per eval prompt"),
        "max_prompts": Spec(
            ("int", "null"),
            None,
            minimum=1,
            maximum=MAX_ROWS,
            doc="score at most the first N eval prompts; null: all, with tools at most as many as the steps train on",
        ),
        "temperature": Spec(("float", "null"), None, minimum=0, doc="sampling temperature; null: training.temperature"),
        "max_new_tokens": Spec(("int", "null"), None, minimum=1, maximum=MAX_TOKENS, doc="null: training.max_completion_length"),
        "pass_threshold": Spec(("float",), 1.0, doc="a sample passes a reward when its score is at least this"),
        "batch_size": Spec(("int",), 64, minimum=1, maximum=MAX_BATCH, doc="sequences generated at once"),
        "pass_at": Spec(("list", "null"), None, doc="k values for pass@k, each from 1 to samples; null: 1 and samples"),
    },
    # training health (grpo_ext/results/watchdog.py); thresholds calibrated on recipes/digit.yaml (docs/benchmarks/watchdog.md)
    "health": {
        "preflight": Spec(
            ("str", "bool"),
            "warn",
            ("warn", "fail", "off", False),
            doc="score the base model's samples before step 1; fail: stop on a warning; off (YAML reads it as false): skip",
        ),
        "preflight_prompts": Spec(
            ("int", "null"),
            None,
            minimum=1,
            maximum=MAX_BATCH,
            doc="training prompts sampled (num_generations each) by the pre-flight; null: 8, with tools at most those the "
            "steps train on",
        ),
        # 0.75: the strict digit reward alone leaves 7 of 8 pre-flight groups of the digit recipe flat (88%)
        "preflight_flat_share": Spec(
            ("float",),
            0.75,
            minimum=0,
            maximum=1,
            doc="share of pre-flight groups without reward spread that warns of little gradient",
        ),
        "on_problem": Spec(
            ("str",), "warn", ("warn", "stop"), doc="a watchdog finding: warn, or stop (checkpoint saved, exit 1)"
        ),
        "zero_std_share": Spec(
            ("float",), 0.9, minimum=0, doc="share of groups with zero reward spread that counts as no signal"
        ),
        "no_signal_steps": Spec(
            ("int",), 6, minimum=1, maximum=MAX_STEPS, doc="steps in a row without signal before the watchdog says so"
        ),
        # 3: a weak base model's first replies may all be ones a reward cannot parse; three steps in a row is the reward
        "unscored_steps": Spec(
            ("int",),
            3,
            minimum=1,
            maximum=MAX_STEPS,
            doc="steps in a row where every reward returned None for every sample (on_error: skip)",
        ),
        "flat_steps": Spec(("int",), 8, minimum=2, maximum=MAX_STEPS, doc="window (steps) for a flat reward and for KL growth"),
        "flat_reward": Spec(("float",), 0.05, minimum=0, doc="the reward's range over flat_steps below which it counts as flat"),
        # 16 steps, 3 standard errors: the lr=1e-9 digit run (sampling noise alone) has t = 1.8 over its 16 steps, the
        # slowest solving digit run t = 4.7 (docs/benchmarks/watchdog.md)
        "trend_steps": Spec(
            ("int",),
            16,
            minimum=4,
            maximum=MAX_STEPS,
            doc="window (steps) over which the reward must rise, by its slope, to count as learning",
        ),
        "trend_z": Spec(("float",), 3.0, minimum=0, doc="standard errors the reward's slope must clear above 0 over trend_steps"),
        "entropy_floor": Spec(("float",), 0.05, minimum=0, doc="mean token entropy (nats) below which exploration has collapsed"),
        "clipped_share": Spec(
            ("float",),
            0.9,
            minimum=0,
            doc="mean share of completions cut at max_completion_length, over clipped_steps, that counts as pinned",
        ),
        "clipped_steps": Spec(
            ("int",), 8, minimum=1, maximum=MAX_STEPS, doc="window (steps) over which the cut share is averaged"
        ),
        "kl_max": Spec(("float",), 1.0, minimum=0, doc="median KL over flat_steps above which KL has blown up"),
        "kl_growth": Spec(
            ("float",), 4.0, minimum=1, doc="median KL over flat_steps growing by this factor counts as rising fast"
        ),
        "length_growth": Spec(
            ("float",), 2.0, minimum=1, doc="mean completion length growing by this factor while the reward rises"
        ),
        "scale_ratio": Spec(
            ("float",), 10.0, minimum=1, doc="rewards whose spreads differ by this factor are on different scales"
        ),
        # 8: flat_steps' window; a run whose model has not called its tool in 8 steps of 8 or more completions each has
        # not drawn one call in 64 samples
        "tool_steps": Spec(
            ("int",),
            8,
            minimum=1,
            maximum=MAX_STEPS,
            doc="steps in a row without a tool call, or with failing calls, before the watchdog says so",
        ),
        "tool_failure_share": Spec(
            ("float",),
            0.5,
            minimum=0,
            maximum=1,
            doc="share of tool calls that fail (tools/failure_frequency), over tool_steps, that counts as failing",
        ),
    },
    "explore": {  # sampling help for the first steps (grpo_ext/run/explore.py); docs/benchmarks/digit-seeds.md
        "end_boost": Spec(
            ("float", "null"),
            None,
            minimum=1.0,
            doc="while training samples, multiply the end-of-reply score by this per token after start; null: off",
        ),
        "start": Spec(("int",), 1, minimum=0, maximum=MAX_TOKENS, doc="tokens of the reply before the end boost begins"),
        "steps": Spec(
            ("int",),
            8,
            minimum=1,
            maximum=MAX_STEPS,
            doc="first steps sampled with the boost; the later ones sample as the eval does",
        ),
    },
    "logging": {  # what the run directory records beside metrics.jsonl (grpo_ext/run/completions.py)
        "completions_steps": Spec(
            ("int", "null"),
            None,
            minimum=0,
            maximum=MAX_STEPS,
            doc="write the completions sampled to completions.jsonl every N steps; null: every training.logging_steps; 0: never",
        ),
        # 20 MB: about 7,000 steps of the digit recipe (16 lines of about 180 bytes a step), about 150 of gsm8k's
        # (64 completions of up to 384 tokens a step, about 2 KB a line)
        "completions_max_mb": Spec(
            ("float",), 20.0, minimum=0, doc="completions.jsonl stops before it passes this size (MB) and says so in a last line"
        ),
    },
    "groups": {  # what a step does with its groups of completions (grpo_ext/run/skipping.py)
        "skip_zero_advantage": Spec(
            ("bool",),
            True,
            doc="leave rows whose advantage is exactly 0 out of the loss's forward and backward (same gradient, less work)",
        ),
        "dynamic_sampling": Spec(
            ("bool", "null"),
            None,
            doc="replace groups whose rewards have no spread by groups for new prompts (DAPO); null: on with algorithm: dapo",
        ),
        "max_extra_rounds": Spec(
            ("int",),
            2,
            minimum=1,
            maximum=MAX_ROUNDS,
            doc="with dynamic_sampling: the most extra generation rounds per generation batch",
        ),
        "share_prompt": Spec(
            ("bool",),
            True,
            doc="encode the prompt tokens a batch shares (system prompt, tool schemas) once, in generation and the loss pass",
        ),
    },
    "reward": {
        "name": Spec(("str",), required=True, doc="registry name, module:function, file.py:function or entry point"),
        "weight": Spec(("float",), 1.0, doc="weight in the summed reward (TRL reward_weights)"),
        "args": Spec(("dict",), {}, doc="keyword arguments for a reward factory"),
        "on_error": Spec(("str",), "fail", ON_ERROR, doc="a raising reward: fail stops the run; skip scores that sample None"),
        "pass_threshold": Spec(
            ("float", "null"), None, doc="an eval sample passes this reward at this score; null: the reward's own, else eval's"
        ),
        "timeout": Spec(
            ("float", "null"), 120.0, minimum=0.1, doc="seconds one call may take before the run stops; null: no limit"
        ),
    },
}

TOP_LEVEL: dict[str, Spec] = {
    "model": Spec(("dict",), required=True, doc="the model to train: name, dtype, LoRA and quantization (model: keys below)"),
    "data": Spec(("dict",), required=True, doc="training prompts and held-out eval rows: inline, a file, a generator or the hub"),
    "rewards": Spec(("list",), required=True, doc="reward functions: names, or mappings with the rewards[i] keys below"),
    "training": Spec(("dict",), {}, doc="GRPOConfig keys under TRL's own names, checked against the installed TRL"),
    "algorithm": Spec(
        ("str", "null"), None, doc="a GRPO variant by name (grpo-ext algorithms); it fills the training keys it defines"
    ),  # a GRPO variant (grpo-ext algorithms): fills training keys the recipe leaves out
    "eval": Spec(("dict",), {}, doc="the before/after eval on held-out prompts: samples, temperature, pass threshold"),
    "health": Spec(("dict",), {}, doc="the reward pre-flight and the training watchdog's thresholds"),
    "explore": Spec(("dict",), {}, doc="an end-of-reply boost for the first training steps"),
    "logging": Spec(("dict",), {}, doc="what the run directory logs beside metrics.jsonl: the completions sampled in training"),
    "groups": Spec(
        ("dict",), {}, doc="what a step does with its groups: zero-advantage rows out of the loss, flat groups replaced"
    ),
    "tools": Spec(
        ("list",), [], doc="functions the model may call while it generates: library names, module:function, file.py:function"
    ),
    "environment": Spec(
        ("str", "dict", "null"),
        None,
        doc="a class (file.py:Class) whose instances the model acts in, one per completion; its methods are tools; "
        "{name: file.py:Class, args: {...}} builds it with args; {NAME: class, ...} holds several, each row's "
        "environment column naming its own (TRL >= 1.8)",
    ),
    "output_dir": Spec(("str",), required=True, doc="the run directory, relative to the working directory"),
    "seed": Spec(("int",), 0, minimum=0, maximum=2**32 - 1, doc="random seed"),  # the seeds numpy (and so TRL's set_seed) takes
    "resume": Spec(
        ("bool", "str"), False, (False, True, "auto"), doc="continue from the last complete checkpoint; auto: when there is one"
    ),
    "save_final": Spec(
        ("bool",), True, doc="write the trained model (or adapter) to final/ when the run completes; false: no final/"
    ),
}

# data.mixture[i]: one source of a mixture: the keys of a data: section that name one source, and its part of the mixture
MIXTURE_SOURCE: dict[str, Spec] = {
    **{key: spec for key, spec in SCHEMA["data"].items() if key not in ("chat", "mixture", "size")},
    "weight": Spec(("float", "null"), None, doc="this source's share of the training rows, in proportion to the other weights"),
    "rows": Spec(
        ("int", "null"),
        None,
        minimum=1,
        maximum=MAX_ROWS,
        doc="exactly this many training rows of this source, drawn by seed (repeated past its size)",
    ),
    "name": Spec(
        ("str", "null"), None, doc="the source's name in the source column and the logs; null: its file, generator or hub id"
    ),
    "environment": Spec(
        ("str", "null"),
        None,
        doc="with several environments (environment: a mapping), the one every row of this source plays in, set as its "
        "environment column; null: the rows' own column",
    ),
}
