"""A reward that is a model: the ``reward_model`` reward, a sequence-classification checkpoint scoring each
prompt with its completion.

A recipe names it as ``{model: PATH_OR_ID}`` (a shorthand) or ``{name: reward_model, args: {model: ...}}``. The
model loads once, the first time the reward is called (never while a recipe is validated), and scores the prompt
and completion as one text: for chat prompts, the conversation with the completion as the assistant's turn,
through the reward model's own chat template when it has one. The score is the logit of ``label`` (0: the
single output of the usual reward head), the value TRL takes from a reward model in ``reward_funcs``; the
same on every TRL, because grpo_ext computes it.
"""

from grpo_ext.core.errors import RecipeError
from grpo_ext.core.text import first_line
from grpo_ext.rewards.api import completion_text, prompt_text
from grpo_ext.rewards.registry import register


class RewardModel:
    """The ``reward_model`` reward (see ``reward_model``); picklable: the loaded model is not part of its state."""

    __name__ = "reward_model"

    def __init__(self, model: str, batch_size: int, dtype: str, device: str, label: int, max_length: int):
        self.model = model
        self.batch_size = batch_size
        self.dtype = dtype
        self.device = device
        self.label = label
        self.max_length = max_length
        self._loaded = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_loaded": None}

    def load(self):
        """(tokenizer, model, device), loaded on the first call."""
        if self._loaded is None:
            import torch
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            device = ("cuda" if torch.cuda.is_available() else "cpu") if self.device == "auto" else self.device
            dtype = (
                (torch.bfloat16 if device.startswith("cuda") else torch.float32)
                if self.dtype == "auto"
                else getattr(torch, self.dtype)
            )
            tokenizer = AutoTokenizer.from_pretrained(self.model)
            net = AutoModelForSequenceClassification.from_pretrained(self.model, dtype=dtype).to(device).eval()
            if tokenizer.pad_token is None:  # batches are padded; a reward model often ships without a pad token
                tokenizer.pad_token = tokenizer.eos_token
            net.config.pad_token_id = tokenizer.pad_token_id
            labels = net.config.num_labels
            if not 0 <= self.label < labels:
                raise ValueError(f"label {self.label}: {self.model} has {labels} output(s); give 0 to {labels - 1}")
            self._loaded = tokenizer, net, device
        return self._loaded

    def preflight(self) -> None:
        """Load the model before the policy does (``train`` calls this): a model that cannot be read stops the run
        with one line, before anything else is loaded or written."""
        try:
            self.load()
        except (OSError, ValueError) as exc:  # transformers' own errors for a missing or unreadable checkpoint
            raise RecipeError(f"reward_model: {self.model} cannot be loaded: {first_line(str(exc))}") from None

    def text(self, tokenizer, prompt, completion) -> str:
        """The prompt with its completion as the model reads them."""
        reply = completion_text(completion)
        if isinstance(prompt, list) and getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template([*prompt, {"role": "assistant", "content": reply}], tokenize=False)
        return prompt_text(prompt) + reply

    def __call__(self, prompts, completions, **kwargs) -> list[float]:
        import torch

        tokenizer, net, device = self.load()
        texts = [self.text(tokenizer, p, c) for p, c in zip(prompts, completions, strict=True)]
        scores: list[float] = []
        for start in range(0, len(texts), self.batch_size):
            batch = tokenizer(
                texts[start : start + self.batch_size],
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            ).to(device)
            with torch.no_grad():
                scores += net(**batch).logits[:, self.label].float().tolist()
        return scores


@register("reward_model", factory=True, example={"model": "my-org/reward-model"})
def reward_model(
    model: str,
    batch_size: int = 8,
    dtype: str = "auto",
    device: str = "auto",
    label: int = 0,
    max_length: int = 2048,
) -> RewardModel:
    """The score a sequence-classification reward model gives the prompt with the completion (its ``label`` logit).

    ``model`` is a local directory or a hub id; the recipe's shorthand ``{model: PATH}`` names this reward. It
    loads on the first call, on ``device`` (``auto``: the GPU when there is one) in ``dtype`` (``auto``: bf16 on a
    GPU, fp32 on the CPU), and scores ``batch_size`` texts at a time, each cut to ``max_length`` tokens. Chat
    prompts are scored as the conversation with the completion as the assistant's turn.
    """
    if not isinstance(model, str) or not model:
        raise ValueError("model: give the reward model's directory or hub id")
    if dtype not in ("auto", "float32", "bfloat16", "float16"):
        raise ValueError(f"dtype {dtype!r}: give auto, float32, bfloat16 or float16")
    if batch_size < 1 or max_length < 1:
        raise ValueError(f"batch_size and max_length must be at least 1, got {batch_size} and {max_length}")
    return RewardModel(model, int(batch_size), dtype, device, int(label), int(max_length))
