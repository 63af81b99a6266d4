"""Layer 2, settings: what a recipe's values mean and which combinations hold, before anything heavy loads: TRL's
version tables, batch rules, GRPO variants, adapter settings, model names, generators, data files, trackers,
model shapes and the run directory's rules. Imports only ``core``."""
