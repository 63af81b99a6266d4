"""Layer 1, core: errors, words for messages, value kinds, bounded YAML, whole-file writes, what a recipe names by a
string (registry name, module:function, file.py:function, entry point), the console, the catalog of what ships and
the optional libraries that load on first use (deferred).
Standard library and PyYAML only; imports nothing else of the package."""
