"""The verbs a person runs, each a function: train, evaluate (``grpo-ext eval``), merge, plan."""
