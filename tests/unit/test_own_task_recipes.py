"""A task of one's own, where no model loads: every shipped recipe, as a run directory records it, validates as it is
there, and a bar drawn with tqdm directly is quiet like the others (the reviews task on the tiny model:
tests/integration/test_own_task.py)."""

import pytest

from tests.helpers import ROOT, recorded_round_trip

SHIPPED = sorted(p.name for p in (ROOT / "recipes").glob("*.yaml"))


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_recipe_recorded_in_a_run_directory_validates_as_it_is(name, tmp_path):
    # every shipped recipe, as a run records it, is valid from the run directory and means the same there
    first, again = recorded_round_trip(ROOT / "recipes" / name, tmp_path / "run")
    assert again == first


@pytest.mark.parametrize("verbose", [False, True])
def test_a_bar_drawn_with_tqdm_directly_is_quiet_like_the_others(verbose, capfd):
    """transformers draws the GGUF conversion's bar with tqdm itself; it is quiet when the other bars are."""
    import transformers
    from tqdm.auto import tqdm

    from grpo_ext.core import console

    console.quiet_third_parties(verbose=False)
    if verbose:
        transformers.utils.logging.enable_progress_bar()  # what --verbose leaves on
    try:
        with console.bars_hushed():
            for _ in tqdm(range(3), desc="Converting and de-quantizing GGUF tensors..."):
                pass
    finally:
        transformers.utils.logging.disable_progress_bar()
    assert ("Converting and de-quantizing" in capfd.readouterr().err) == verbose
