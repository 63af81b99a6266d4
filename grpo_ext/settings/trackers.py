"""Logging services for ``training.report_to``, checked before anything loads.

``report_to`` passes through to TRL and transformers unchanged; this module only makes a misspelt or
missing service a recipe error (one line naming the fix) instead of a traceback after the model loaded.
"""

import importlib.util

from grpo_ext.core.text import shown, suggest

# report_to name → (modules that provide it, package to install). Names are transformers' integrations.
SERVICES: dict[str, tuple[tuple[str, ...], str]] = {
    "tensorboard": (("tensorboard", "tensorboardX"), "tensorboard"),
    "trackio": (("trackio",), "trackio"),
    "wandb": (("wandb",), "wandb"),
    "mlflow": (("mlflow",), "mlflow"),
    "comet_ml": (("comet_ml",), "comet-ml"),
    "neptune": (("neptune",), "neptune"),
    "clearml": (("clearml",), "clearml"),
    "dagshub": (("dagshub",), "dagshub"),
    "dvclive": (("dvclive",), "dvclive"),
    "swanlab": (("swanlab",), "swanlab"),
    "codecarbon": (("codecarbon",), "codecarbon"),
    "azure_ml": (("azureml",), "azureml-core"),
    "flyte": (("flytekit",), "flytekit"),
    "kubeflow": (("kubeflow",), "kubeflow"),
}
SPECIAL = ("none", "all")


def installed(name: str) -> bool:
    return any(importlib.util.find_spec(module) is not None for module in SERVICES[name][0])


def check_report_to(training: dict) -> list[str]:
    """Problems with ``training.report_to``: a name transformers does not know, or a service not installed."""
    if "report_to" not in training or training["report_to"] is None:
        return []
    value = training["report_to"]
    if not isinstance(value, (str, list)):
        return []  # compat.check_training reports the wrong kind
    names = [value] if isinstance(value, str) else value
    if not all(isinstance(n, str) for n in names):
        return [f"training.report_to: expected service names (e.g. [tensorboard]), got {shown(value)}"]
    problems = []
    for name in names:
        if name in SPECIAL:
            continue
        if name not in SERVICES:
            problems.append(f"training.report_to: unknown service {name!r}{suggest(name, [*SERVICES, *SPECIAL])}")
        elif not installed(name):
            problems.append(
                f"training.report_to: {name} is not installed; run: pip install {SERVICES[name][1]}, or drop it from report_to"
            )
    return problems
