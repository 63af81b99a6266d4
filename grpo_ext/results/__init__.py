"""Layer 6, results: what is measured of a run and a model, from what it sampled: scoring, eval statistics, the
pre-flight's verdicts, the watchdog, the report and its plots, the model card; the sampling itself is
``run.sampling``'s. Imports ``run`` and the layers below."""
