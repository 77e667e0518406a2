"""The GRPO engine's dependence on TRL's private methods and attributes, checked against the installed TRL: a
TRL upgrade fails here, naming what to recheck, before a training run trips on it."""

from __future__ import annotations

import inspect
import re
import warnings
from importlib.metadata import version

from trl import GRPOTrainer

from searchlab.rl.trainer import PRIVATE_ATTRIBUTES, PRIVATE_METHODS, WRITTEN_FOR_TRL, SearchGRPOTrainer
from searchlab.train.common import TRL_DEPRECATION, ignore_trl_deprecation
from tests.toyworld import make_model


def test_the_installed_trl_is_the_one_the_private_overrides_were_written_for():
    assert version("trl") == WRITTEN_FOR_TRL, (
        f"TRL {version('trl')} is installed, but searchlab/rl/trainer.py's private overrides were written for "
        f"{WRITTEN_FOR_TRL}: recheck each of PRIVATE_METHODS and PRIVATE_ATTRIBUTES against the new GRPOTrainer, "
        f"then update WRITTEN_FOR_TRL")


def test_every_private_method_the_engine_relies_on_exists_with_the_parameters_it_was_written_against():
    for name, expected in PRIVATE_METHODS.items():
        method = getattr(GRPOTrainer, name, None)
        assert method is not None, f"GRPOTrainer.{name} is gone"
        parameters = list(inspect.signature(method).parameters)[1:]  # after self
        assert parameters[:len(expected)] == list(expected), f"GRPOTrainer.{name}{tuple(parameters)}"
    # every private method the subclass overrides is declared (the list above is the whole surface)
    overridden = {name for name, value in vars(SearchGRPOTrainer).items()
                  if name.startswith("_") and not name.startswith("__") and callable(value)
                  and hasattr(GRPOTrainer, name)}
    assert overridden <= set(PRIVATE_METHODS), overridden - set(PRIVATE_METHODS)


def test_every_private_attribute_the_engine_reads_is_still_set_by_trl():
    source = inspect.getsource(GRPOTrainer)
    for name in PRIVATE_ATTRIBUTES:
        assert f"self.{name} =" in source or f"self.{name}[" in source, f"GRPOTrainer no longer sets self.{name}"



def _future_warnings_of_unwrapping(model, filtered: bool) -> list[str]:
    """The FutureWarnings TRL's unwrapping of ``model`` for generation raises (what every RL step does), with or
    without the engine's filter."""
    from accelerate import Accelerator
    from trl.models import unwrap_model_for_generation

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if filtered:
            ignore_trl_deprecation()
        with unwrap_model_for_generation(model, Accelerator(cpu=True)):
            pass
    return [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]


def test_the_filtered_trl_deprecation_is_still_raised_and_nothing_else_is_filtered(tokenizer):
    """The filter of TRL's read of the deprecated ``is_gradient_checkpointing`` stays only while the installed TRL
    triggers it: without the filter the warning is there, with it it is gone, and a FutureWarning of another text
    from the same module still shows."""
    model = make_model(tokenizer)
    assert any(re.fullmatch(TRL_DEPRECATION, text) for text in _future_warnings_of_unwrapping(model, False)), (
        "the installed TRL no longer reads is_gradient_checkpointing when it unwraps a model: remove "
        "ignore_trl_deprecation from searchlab/train/common.py")
    assert _future_warnings_of_unwrapping(model, True) == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ignore_trl_deprecation()
        warnings.warn_explicit("another deprecation", FutureWarning, "modeling_utils.py", 1,
                               module="transformers.modeling_utils")
    assert [str(w.message) for w in caught] == ["another deprecation"]
