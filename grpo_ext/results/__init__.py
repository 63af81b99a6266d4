"""Layer 6, results: what is measured of a run and a model: scoring, eval statistics, the pre-flight, the
watchdog, the report and its plots, the model card. Imports ``run`` and the layers below."""
