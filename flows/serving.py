"""What a run started from the served deployment may ask for: the served params' endpoints and secrets, no others.

Anyone who can reach the Prefect server can start a run of a deployment with
parameters of their choosing (``params_file``, ``overrides``, ``root``). Those
parameters must not redirect data or credentials: a ``qa.solvers`` entry with
``backend: openai``, a ``url`` and ``api_key_env: AWS_SECRET_ACCESS_KEY`` would
send that secret to any URL. `searchlab serve` records what it serves (the
project root, the params file, the validated params) in an environment variable
of its own process; the runs it executes inherit it, and no run parameter or
deployment setting can change it. :func:`check_deployment_run` compares a run's
request with that record before any stage runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from searchlab.endpoints import untrusted_changes
from searchlab.params import Params, load_params

SERVED = "SEARCHLAB_SERVED"  # environment variable: JSON {"root", "params_file", "params"} of what is served


class UntrustedRunError(ValueError):
    """A deployment run asked for something the served params do not allow; the message names it."""


def served_record(root: Path, params_file: str, params: Params) -> str:
    """The value of :data:`SERVED` for a `searchlab serve` of ``params_file`` (already loaded as ``params``)."""
    return json.dumps({"root": str(root.resolve()), "params_file": params_file,
                       "params": params.model_dump(mode="json")})


def check_deployment_run(root: Path, params_file: str, overrides: list[str]) -> None:
    """Refuse a deployment run whose project, params file or params differ from what is served where it matters.

    The run must use the served project root and a params file inside its
    ``params/`` folder (else any readable file could be parsed, and quoted in an
    error message), and its params may not set an endpoint URL or secret-bearing
    key that the served params do not hold (:func:`searchlab.endpoints.untrusted_changes`).
    Raises :class:`UntrustedRunError`; a params file that does not load raises its ``ParamsError``.
    """
    record = os.environ.get(SERVED)
    if not record:
        raise UntrustedRunError("this run comes from a deployment, but the process running it was not started by "
                                "`searchlab serve`, so there are no served params to check it against")
    served = json.loads(record)
    served_root = Path(served["root"])
    if root.resolve() != served_root:
        raise UntrustedRunError(f"root {str(root)!r}: runs of this deployment use the served project {served_root}")
    path = (served_root / params_file).resolve()
    if not path.is_relative_to((served_root / "params").resolve()) \
            and path != (served_root / served["params_file"]).resolve():
        raise UntrustedRunError(f"params_file {params_file!r}: runs of this deployment take a params file from "
                                f"{served_root / 'params'}")
    changes = untrusted_changes(load_params(path, overrides), Params.model_validate(served["params"]))
    if changes:
        raise UntrustedRunError(
            "runs of this deployment may not set endpoint URLs or secret-bearing keys that the served params "
            f"({served['params_file']}) do not hold:\n  " + "\n  ".join(changes)
            + "\nput them in the params file you serve, and serve it again")
