"""Layer 3, data: where a run's prompts come from, in plain Python: the data files a recipe names (``datafiles``:
formats, columns, the prompt rule, a full check), the built-in generators of prompts with answers (``generators``),
a mixture of training sources (``mixture``) and the worked examples shown before every prompt (``examples``).
Imports ``settings`` and ``core``."""
