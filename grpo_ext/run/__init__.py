"""Layer 5, run: the parts a run is made of: hardware, launch, model loading and the model cache, prompts and
data, the trainer's construction, TRL's internals behind one module (trl_internals) and the GRPO behaviours its
trainer calls (row skipping, dynamic sampling, the tool results TRL drops, TIC-GRPO's loss), sampling with the tool
loop (rollouts), sampling a model for an eval or the pre-flight (sampling) and their prompts shared among several
processes (shares), the run directory, progress, the completions log, the end boost and the memory model. Imports
``recipe`` and the layers below."""

from grpo_ext.core.deferred import defer_optional_libraries

# before this layer's first import of trl or peft, which import bitsandbytes at their own import (see core.deferred)
defer_optional_libraries()
