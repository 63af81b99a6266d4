"""A tiny causal LM and tokenizer built locally, for plumbing tests and checks that need no download.

    python -m grpo_ext.tiny DIR                          # writes a ~1 MB Llama-shaped model with a chat template to DIR
    python -m grpo_ext.tiny DIR --chatml --context 2048  # ChatML's template and tokens, room for tools' schemas

Weights are random: it trains and generates, it does not answer anything sensibly.
"""

import argparse
import sys
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)

# ChatML as SmolLM2 ships it: no tools (a tool recipe gets grpo_ext's ChatML tool template in its place)
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

CORPUS = [
    "Reply with only one digit from 0 to 9.",
    "0 1 2 3 4 5 6 7 8 9",
    "The answer is 42. #### 42",
    "<think>short</think><answer>7</answer>",
    "What is 3 + 4? Seven. 7",
    "abcdefghijklmnopqrstuvwxyz",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ .,:;!?()[]{}<>/\\|-_+=*&^%$#@~'\"",
]


def build(
    path: str | Path, *, seed: int = 0, hidden: int = 32, layers: int = 2, chatml: bool = False, context: int = 256
) -> Path:
    """Write a tiny model and its tokenizer to ``path`` and return it; with ``chatml`` its chat template and special
    tokens are ChatML's (``<|im_start|>``, ``<|im_end|>``), as SmolLM2's and Qwen's; ``context``: the tokens it takes
    (prompt and completion together)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    path = Path(path)
    specials = (
        ["<|pad|>", "<|im_end|>", "<|im_start|>"] if chatml else ["<|pad|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
    )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        CORPUS * 4,
        trainers.BpeTrainer(vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<|pad|>",
        eos_token="<|im_end|>" if chatml else "<|end|>",
        model_input_names=["input_ids", "attention_mask"],
    )  # as Llama tokenizers
    tokenizer.chat_template = CHATML_TEMPLATE if chatml else CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=context,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m grpo_ext.tiny DIR [--chatml] [--context N]``: build the tiny model in DIR and print where it is."""
    parser = argparse.ArgumentParser(
        prog="python -m grpo_ext.tiny", description="Build a tiny random Llama model with a chat template in DIR."
    )
    parser.add_argument("dir", metavar="DIR")
    parser.add_argument(
        "--chatml",
        action="store_true",
        help="ChatML's template and tokens (<|im_start|>, <|im_end|>), as SmolLM2's: a recipe with tools then gets "
        "grpo_ext's ChatML tool template",
    )
    parser.add_argument(
        "--context",
        type=int,
        default=256,
        metavar="N",
        help="the tokens it takes, prompt and completion together (default 256; the schema of a tool in the prompt "
        "takes hundreds of its tokens)",
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    print(build(args.dir, chatml=args.chatml, context=args.context))
    return 0
