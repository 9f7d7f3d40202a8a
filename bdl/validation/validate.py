"""``bdl.validate``: a kernel against the NUTS gold standard on the same compiled model."""

from __future__ import annotations

import dataclasses
import inspect
import time
import warnings
from pathlib import Path
from typing import Any

import jax
import numpy as np

from bdl.compile.compiled_model import CompiledModel
from bdl.compile.target import Target
from bdl.kernels.base import Kernel
from bdl.sampling import ConvergenceWarning, DivergenceWarning, Samples, sample
from bdl.sampling.run.argument_checks import check_run, check_start
from bdl.utils.arguments import instance, suggestion
from bdl.validation.compare import Row, compare_functions, compare_parameters
from bdl.validation.converged import convergence_rows, reference_convergence
from bdl.validation.reference import Reference, nuts_reference
from bdl.validation.reference_draws import ReferenceSamples


@dataclasses.dataclass
class ValidationReport:
    """The comparison table, the verdict and where the plot went.

    Attributes:
        model: the model's name.
        kernel: the kernel's name.
        space: ``"parameter"`` or ``"function"``, where the draws were compared.
        rows: the comparison's rows, in the order of the table.
        reference: the NUTS draws compared against.
        samples: the kernel's draws.
        plot: where the figure was saved (``None``: none).
        seconds: the wall-clock time of each part (NUTS, the kernel, the comparison).
    """

    model: str
    kernel: str
    space: str
    rows: list[Row]
    reference: Reference
    samples: Samples
    plot: Path | None
    seconds: dict[str, float]

    @property
    def passed(self) -> bool:
        return all(r.passed is not False for r in self.rows)

    def table(self) -> str:
        """The comparison as a table: NUTS's diagnostics, one line per row, the verdict.

        Returns:
            The table, as ``print(report)`` shows it.
        """
        head = f"{'quantity':<34}{'kernel':>12}{'NUTS':>12}  {'threshold':<16}"
        lines = [
            f"{self.model}: {self.kernel} vs NUTS ({self.space} space; NUTS max R̂ "
            f"{self.reference.max_rhat:.3f}, min bulk ESS {self.reference.min_ess:.0f})",
            head,
            "-" * len(head),
        ]
        lines += [r.format() for r in self.rows]
        if any(r.reference is not None for r in self.rows):
            lines.append("(NUTS: its own value, by the same rules; blank: a comparison with NUTS)")
        lines.append(f"verdict: {'PASS' if self.passed else 'FAIL'}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def validate(
    target: Target,
    kernel: Kernel,
    *,
    num_steps: int,
    burn_in: int = 0,
    thin: int = 1,
    num_chains: int = 4,
    seed: int = 0,
    init: Any = "auto",
    reference: Reference | ReferenceSamples | None = None,
    nuts: dict[str, Any] | None = None,
    plot: str | Path | None = None,
    progress: bool = False,
    parameter_labels: dict[str, Any] | None = None,
) -> ValidationReport:
    """Run NUTS (or reuse ``reference``) and ``kernel`` on ``target``, compare, plot.

    Args:
        target: a compiled model or potential (``bdl.compile``).
        kernel: the kernel to validate (``bdl.kernels.get(...)``).
        num_steps: steps per chain of the kernel's run, burn-in included.
        burn_in: steps discarded before the kernel's draws are kept.
        thin: keep every ``thin``-th state after burn-in.
        num_chains: the kernel's chains (its R̂ needs at least 2).
        seed: the seed of the kernel's run.
        reference: NUTS draws of ``target`` to compare against instead of running NUTS: a
            :class:`bdl.validation.Reference`, or what :func:`bdl.reference` returns.
        nuts: keyword arguments for :func:`bdl.validation.nuts_reference` (num_warmup, …).
        plot: where to save the figure (``None``: no figure).
        progress: print the kernel's progress line to stderr.
        init: the kernel's start (as :func:`bdl.sample`).
        parameter_labels: names along the first axis of some position leaves, by path (e.g.
            ``{"net/w": feature_names}``), for the table and the figure
            (:func:`bdl.utils.trees.parameter_names`).

    Ctrl-C while the kernel runs raises ``KeyboardInterrupt``: a comparison of part of the run
    would judge a different run. Chains that diverged are left out of every comparison, and a
    row "diverged chains" fails the validation: a kernel that diverges on the model did not
    sample it. The kernel run's own convergence (``samples.convergence``: R̂, bulk and tail ESS,
    stuck chains) comes next as gated rows; a run that fails it is not compared with NUTS, and
    those rows fail the validation. The arguments are checked before NUTS runs, so that a bad
    one fails at once.

    Returns:
        A :class:`bdl.validation.ValidationReport`: the comparison's rows (each with its value,
            NUTS's, its threshold and whether it passed), ``passed``, the draws of both runs, the
            plot's path and the seconds each part took; ``print(report)`` shows the table.

    Raises:
        ValueError: an argument out of its range (steps, burn-in, chains), or a reference of
            another target.
        UntrustedReferenceError: NUTS's own draws fail the trust gate (R̂ ≥ 1.01 or bulk ESS
            < 400): lengthen NUTS with ``nuts={"num_warmup": ..., "num_samples": ...}``.
        KeyboardInterrupt: Ctrl-C while the kernel runs.

    Examples:
        >>> import jax.numpy as jnp
        >>> import bdl
        >>> from bdl.data import linear_regression
        >>> model = bdl.Model(
        ...     network=lambda params, x: x @ params["w"],
        ...     params={"w": jnp.zeros(2)},
        ...     likelihood=bdl.Gaussian(scale=0.5),
        ...     prior=bdl.Normal(1.0),
        ... )
        >>> data = linear_regression(n=50, dim=2, n_test=10)
        >>> compiled = bdl.compile(model, data, batch_size=10)
        >>> kernel = bdl.kernels.get("sghmc", step_size=0.01)
        >>> report = bdl.validate(
        ...     compiled, kernel, num_steps=400, burn_in=100,
        ...     nuts={"num_warmup": 200, "num_samples": 200},
        ... )
        >>> report.kernel, report.rows[0].name
        ('sghmc', 'diverged chains (left out)')
        >>> print(report)  # doctest: +ELLIPSIS
        linear_regression: sghmc vs NUTS (parameter space; NUTS max R̂ ...)
        ...
        verdict: ...
    """
    _check(target, kernel, num_steps, burn_in, thin, num_chains, seed, init, nuts, progress)
    reference = _as_reference(reference, target)
    start = time.perf_counter()
    if reference is None:
        reference = nuts_reference(target, **(nuts or {}))
    t_ref = time.perf_counter() - start
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "sampling interrupted", UserWarning)  # raised below
        warnings.filterwarnings("ignore", category=DivergenceWarning)  # a row of the report
        warnings.filterwarnings("ignore", category=ConvergenceWarning)  # rows of the report
        samples = sample(
            target,
            kernel,
            num_steps=num_steps,
            burn_in=burn_in,
            thin=thin,
            num_chains=num_chains,
            seed=seed,
            init=init,
            progress=progress,
        )
    if samples.interrupted:
        # part of a run is no validation: stop as Ctrl-C stops everything else
        raise KeyboardInterrupt(f"validation interrupted after {samples.steps_done} steps")
    t_kernel = time.perf_counter() - start
    healthy = samples.healthy_chains
    diverged = Row(
        "diverged chains (left out)",
        float(samples.num_chains - healthy.size),
        None,
        "= 0",
        healthy.size == samples.num_chains,
    )
    runaway = int(np.count_nonzero(samples.runaway))
    ran_away = Row("run-away or hot chains", float(runaway), None, "= 0", runaway == 0)
    nuts_verdict = None
    if samples.convergence is not None:
        nuts_verdict = reference_convergence(target, reference.positions)
    converged = [ran_away, *convergence_rows(samples.convergence, nuts_verdict)]
    if healthy.size == 0:
        rows = [diverged]
    elif any(r.passed is False for r in converged):  # no draws of anything yet: not compared
        rows = [diverged, *converged]
    else:
        positions = jax.tree.map(lambda a: a[healthy], samples.positions)
        if reference.space == "function":
            assert isinstance(target, CompiledModel)
            rows = [
                diverged,
                *converged,
                *compare_functions(target, positions, reference.positions),
            ]
        else:
            rows = [
                diverged,
                *converged,
                *compare_parameters(
                    positions, reference.positions, seed=seed, labels=parameter_labels
                ),
            ]
    plot_path = None
    if plot is not None:
        from bdl.validation.plots import plot_validation

        plot_path = plot_validation(
            Path(plot),
            target,
            samples,
            reference,
            f"{model_label(target)}: {samples.kernel} vs NUTS",
            labels=parameter_labels,
        )
    return ValidationReport(
        model_label(target),
        samples.kernel,
        reference.space,
        rows,
        reference,
        samples,
        plot_path,
        {"nuts": t_ref, "kernel": t_kernel},
    )


def model_label(target: Target) -> str:
    """The name a validation table gives ``target``: its own, or, for a model named neither in
    ``bdl.Model(name=...)`` nor by its data (compiled from a dict or a tuple of arrays, which
    name it "data"), what it is.

    Args:
        target: the compiled model or potential.

    Returns:
        e.g. ``"linear_regression"``, or ``"unnamed model (Gaussian likelihood, n = 8)"``.
    """
    declared = getattr(target, "model", None)
    if target.name != "data" or getattr(declared, "name", None) != "model":
        return target.name
    likelihood = type(getattr(declared, "likelihood", None)).__name__
    return f"unnamed model ({likelihood} likelihood, n = {target.n})"


def _as_reference(reference: Any, target: Target) -> Reference | None:
    """``validate(reference=...)`` as a :class:`Reference` (unwrapped from what
    :func:`bdl.reference` returns), checked against the target's parameters before anything
    runs: ``TypeError``/``ValueError`` naming the argument."""
    if reference is None:
        return None
    if isinstance(reference, ReferenceSamples):
        if reference.reference is None:
            raise ValueError(
                "validate(reference=...) got reference draws without their NUTS run (loaded "
                "from a file that does not keep it); pass the bdl.reference(...) result itself, "
                "or leave reference out to run NUTS."
            )
        reference = reference.reference
    if not isinstance(reference, Reference):
        raise TypeError(
            "validate(reference=...) must be NUTS draws of the target: what "
            f"bdl.reference(compiled) returns, or a bdl.validation.Reference; got "
            f"{type(reference).__name__}."
        )
    expected = jax.tree.structure(target.initial_position)
    leaves = jax.tree.leaves(reference.positions)
    shapes_match = jax.tree.structure(reference.positions) == expected and all(
        tuple(np.shape(a)[2:]) == tuple(np.shape(b))
        for a, b in zip(leaves, jax.tree.leaves(target.initial_position), strict=True)
    )
    if not shapes_match:
        raise ValueError(
            f"validate(reference=...) holds draws of other parameters than {target.name}'s: "
            "it was computed for another model (or another network). Compute it with "
            "bdl.reference(compiled) on this compiled model, or leave reference out."
        )
    return reference


#: the options ``nuts=`` may give :func:`nuts_reference`
_NUTS_OPTIONS = [p for p in inspect.signature(nuts_reference).parameters if p != "target"]


def _check(
    target: Any,
    kernel: Any,
    num_steps: Any,
    burn_in: Any,
    thin: Any,
    num_chains: Any,
    seed: Any,
    init: Any,
    nuts: Any,
    progress: Any,
) -> None:
    """What ``sample`` would refuse, and unknown NUTS options, before the reference runs."""
    instance(target, Target, "validate() needs a compiled target from bdl.compile(...)")
    instance(
        kernel,
        Kernel,
        "validate(kernel=...) must be a bdl kernel, e.g. bdl.kernels.get('sghmc', step_size=1e-3)",
    )
    if getattr(target, "augment", None) is not None:
        raise ValueError(
            f"validate() compares against NUTS on the full-data energy, which has no data "
            f"augmentation, but this model augments its minibatches ({target.augment!r}): the "
            "kernel targets the Jensen posterior of the augmented data, a different "
            "distribution. Compile the model without augment= to validate the kernel."
        )
    check_run(num_steps, burn_in, thin, num_chains)
    options = {"seed": seed, "init": init, "num_chains": num_chains, "progress": progress}
    check_start(target, kernel, options)
    if nuts is not None:
        if not isinstance(nuts, dict):
            raise TypeError(f"validate(nuts=...) must be a dict of options; got {nuts!r}.")
        valid = _NUTS_OPTIONS
        for key in nuts:
            if key not in valid:
                raise ValueError(
                    f"validate(nuts=...): unknown option {key!r}.{suggestion(key, valid)} "
                    f"Valid: {', '.join(valid)}."
                )
