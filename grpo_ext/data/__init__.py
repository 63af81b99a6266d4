"""Layer 3, data: where a run's prompts come from, in plain Python: the data files a recipe names (``datafiles``:
formats, columns, the prompt rule, a full check), the built-in generators of prompts with answers (``generators``),
a mixture of training sources (``mixture``), the worked examples shown before every prompt (``examples``) and the
tasksets of the verifiers library, with their rewards and tools (``verifiers_tasks``; verifiers imported only there,
when a recipe names it). Imports ``settings`` and ``core``."""
