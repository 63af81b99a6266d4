"""Layer 7, verbs: what a person runs, one module per command (or per few close ones), each owning its parser
(``add_parser``) beside the function it runs: train, validate, catalog (``ls``, ``cp``), library (``rewards``,
``tools``), schema, algorithms, sweep (``eval``, both forms), filter, merge, push, plan, doctor; and evaluate, the
Python API of ``eval``. Imports every layer below."""
