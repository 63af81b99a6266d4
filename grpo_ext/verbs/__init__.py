"""Layer 7, verbs: what a person runs, one module each: train, evaluate (``grpo-ext eval``), merge, push, filter, plan, doctor,
sweep (``grpo-ext eval --checkpoints``). Imports every layer below."""
