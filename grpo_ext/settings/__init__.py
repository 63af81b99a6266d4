"""Layer 2, settings: what a recipe's values mean and which combinations hold, before anything heavy loads: TRL's
version tables, batch rules, GRPO variants, adapter settings, model names, trackers, model shapes, the largest
counts a recipe may ask for and the run directory's rules. Imports only ``core``."""
