"""`dinoml.reference`: runs a graph with the C++ reference interpreter (`ops::interpret`), the
oracle used by `dinoml validate` and the tests."""
from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from .spec import Spec


def reference(spec, inputs: Mapping[str, np.ndarray], states: Optional[Mapping[str, np.ndarray]] = None,
              return_states: bool = False):
    """Evaluates `spec` (a Spec or a C++ Graph) on numpy `inputs` -> {output name: array}.

    Dtypes follow the runtime's rules: inputs must match exactly except that bfloat16 inputs
    accept float32 (rounded to nearest even) or uint16 bit arrays, and bfloat16 results come back
    as float32. `states` gives state values before the run (zeros otherwise); with
    return_states=True the result is (outputs, states after the run).
    """
    graph = spec.graph if isinstance(spec, Spec) else spec
    from ._ext import ext
    outs, sts = ext.interpret(graph, dict(inputs), dict(states or {}))
    return (outs, sts) if return_states else outs
