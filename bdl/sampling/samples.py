"""The result of :func:`bdl.sample`: draws with (chain, draw) axes, per-draw info, conversions."""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path
from typing import Any

import jax
import numpy as np

from bdl.diagnostics.convergence import Convergence
from bdl.diagnostics.runaway import flagged_report
from bdl.sampling.kept.names import leaf_keys, posterior_name
from bdl.sampling.kept.writing import save_samples

PyTree = Any


class DivergenceWarning(UserWarning):
    """Issued by :func:`bdl.sample` when a chain diverged: its later draws are not valid
    (:meth:`Samples.flat` and the predictive leave them out)."""


class RunawayWarning(DivergenceWarning):
    """Issued by :func:`bdl.sample` when a chain ran away or ran hot while staying finite: its
    energy or parameter norm kept growing through the sampling phase, or its configurational
    temperature is above T beyond its sampling error (``samples.runaway``; [Run-away and hot
    chains](../sampling.md#run-away-and-hot-chains)). A :class:`DivergenceWarning`, so a filter
    on that catches it."""


class ConvergenceWarning(UserWarning):
    """Issued by :func:`bdl.sample` when its draws fail the convergence check
    (``samples.convergence``: R̂, bulk and tail ESS, stuck chains); the message names the worst
    quantities and what to change ([Troubleshooting](../troubleshooting.md))."""


class BiasWarning(ConvergenceWarning):
    """Issued by :func:`bdl.sample` when its draws fail the bias check
    (``samples.convergence.bias``, :mod:`bdl.diagnostics.bias`): the Stein identities of π_T
    fail beyond their Monte Carlo error, so the chains mix around a law that is not π_T (too
    wide, too narrow or shifted: the bias of a finite step and noisy gradients). The message
    names the statistic, its value and standard error, and what to change. A
    :class:`ConvergenceWarning`, so a filter on that catches it; the draws are kept."""


@dataclasses.dataclass(frozen=True, eq=False)
class Samples:
    """Collected draws.

    Attributes:
        positions: θ draws, a pytree of arrays shaped ``(chains, draws, ...)``.
        extra: further collected quantities (e.g. ``{"guide": θ_a}`` for Entropy-MCMC).
        info: per-draw diagnostics (energy, kinetic energy, …), arrays ``(chains, draws)``.
        steps: the 0-based step index after which each draw was taken, ``(draws,)``.
        kernel: the kernel's name.
        steps_done: steps completed. Below ``num_steps`` when interrupted, and by
            ``(num_steps − burn_in) mod thin`` otherwise: trailing steps that could not end a
            draw are not run.
        interrupted: the run was stopped early (Ctrl-C); the draws up to then are kept.
        diverged: per chain, whether a step gave a non-finite energy, gradient or state, or
            took the chain far out (:mod:`bdl.sampling.run.failures`); the chain was then frozen
            at its state at the start of that draw.
        divergence_step: per chain, the step at which it diverged (−1: never).
        runaway: per chain, whether it ran away or ran hot while staying finite
            (:mod:`bdl.sampling.verdict.runaway_check`): its energy or ‖θ‖ kept growing through the
            kept draws, or its configurational temperature is above T beyond its sampling error.
            All ``False`` when nothing was tested (no draws kept, draws assembled by hand).
        runaway_step: per chain, the step of the first draw counted as run away (−1: never).
        runaway_reason: per chain, what was seen (``""``: nothing).
        adapted: the values warm-up adaptation chose per chain (``step_size``, ``friction``,
            ``mass`` or ``inverse_mass``), or ``None`` when the kernel had its own step size.
        meta: where the draws came from, JSON-able: the model's name, the kernel
            (:func:`bdl.kernels.describe`), bdl's version and the run's settings
            (:func:`bdl.sampling.kept.provenance.run_meta`); empty for draws assembled by hand.
        evaluation: the test-set BMA scored while sampling (``bdl.sample(..., evaluate=...)``):
            a :class:`bdl.evaluation.BMAEvaluation` with the final metrics and the
            BMA-versus-draws curve; ``None`` when the run did not evaluate.
        kept_draws: whether the draws are held here; ``False`` for a run with
            ``keep_draws=False``, whose per-draw fields are empty (no draws) while the run's
            fields (``steps_done``, ``diverged``, ``adapted``, ``evaluation``) are complete.
        convergence: the convergence check of the draws (:func:`bdl.sampling.check_convergence`):
            ``ok``, the worst R̂, bulk and tail ESS and where, the thresholds and the stuck
            chains; ``None`` when nothing was checked (no draws kept, a run at temperature 0,
            draws assembled by hand, files written before bdl checked).
    """

    positions: PyTree
    extra: dict[str, PyTree]
    info: dict[str, np.ndarray]
    steps: np.ndarray
    kernel: str
    steps_done: int
    interrupted: bool = False
    diverged: np.ndarray | None = None
    divergence_step: np.ndarray | None = None
    adapted: dict[str, Any] | None = None
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    evaluation: Any = None
    kept_draws: bool = True
    convergence: Convergence | None = None
    runaway: np.ndarray | None = None
    runaway_step: np.ndarray | None = None
    runaway_reason: list[str] | None = None

    def __post_init__(self) -> None:
        if self.diverged is None:
            object.__setattr__(self, "diverged", np.zeros(self.num_chains, bool))
        if self.divergence_step is None:
            object.__setattr__(self, "divergence_step", np.full(self.num_chains, -1, np.int64))
        if self.runaway is None:
            object.__setattr__(self, "runaway", np.zeros(self.num_chains, bool))
        if self.runaway_step is None:
            object.__setattr__(self, "runaway_step", np.full(self.num_chains, -1, np.int64))
        if self.runaway_reason is None:
            object.__setattr__(self, "runaway_reason", [""] * self.num_chains)

    @property
    def num_chains(self) -> int:
        return int(jax.tree.leaves(self.positions)[0].shape[0])

    @property
    def num_draws(self) -> int:
        return int(jax.tree.leaves(self.positions)[0].shape[1])

    @property
    def valid(self) -> np.ndarray:
        """(chains, draws): whether a draw was taken before its chain diverged."""
        stop = np.where(self.diverged, self.divergence_step, np.iinfo(np.int64).max)
        return np.asarray(self.steps)[None, :] < stop[:, None]

    @property
    def healthy_chains(self) -> np.ndarray:
        """Indices of the chains that never diverged."""
        return np.flatnonzero(~np.asarray(self.diverged))

    def divergence_report(self) -> str:
        """One line naming the diverged chains and their steps ('' when none diverged).

        Returns:
            The line, or ``''``.
        """
        bad = np.flatnonzero(self.diverged)
        if bad.size == 0:
            return ""
        where = ", ".join(f"chain {c} at step {int(self.divergence_step[c])}" for c in bad)
        return (
            f"{bad.size} of {self.num_chains} chains diverged ({where}): a non-finite energy, "
            "gradient or state, or an energy far beyond what π_T reaches; their draws up to then "
            "are kept, later ones excluded."
        )

    def runaway_report(self) -> str:
        """The chains that ran away or ran hot: a summary line naming them, then the step and
        reason of at most :data:`bdl.diagnostics.runaway.DETAILED` of them, the others counted
        by kind (every chain's reason stays in :attr:`runaway_reason`).

        Returns:
            The report (``""`` when no chain did).
        """
        return flagged_report(
            np.asarray(self.runaway, bool), np.asarray(self.runaway_step), self.runaway_reason
        )

    def flat(
        self, what: str = "position", *, healthy: bool = False, frozen: bool = False
    ) -> PyTree:
        """Draws with chains and draws merged into one leading sample axis.

        By default the valid draws (:attr:`valid`): a diverged chain's draws up to its
        divergence, not the later ones, which repeat its last finite state. ``healthy``: only
        the chains that never diverged. ``frozen``: every draw, the repeated states included
        (the ``(chains × draws)`` stack of :attr:`positions`).

        Warns (:class:`DivergenceWarning`) when what it returns is not to be trusted: with
        ``frozen``, when some draws were taken after their chain diverged; whatever the
        options, when every chain diverged (the draws left are those of chains that were
        failing, possibly already far out). The predictive reads a ``Samples`` through this
        method, so it warns the same way.

        Args:
            what: ``"position"`` (the draws), or the name of an ``extra`` entry (e.g.
                ``"guide"``, Entropy-MCMC's θ_a).
            healthy: keep only the chains that never diverged.
            frozen: keep every draw, those taken after a divergence included.

        Returns:
            The pytree with one leading axis of samples.

        Raises:
            KeyError: ``what`` is neither ``"position"`` nor an entry of ``extra``.
        """
        tree = self.positions if what == "position" else self.extra[what]
        if healthy:
            keep = self.healthy_chains
            tree = jax.tree.map(lambda a: a[keep], tree)
        flat = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), tree)
        after = int(np.size(self.valid) - np.count_nonzero(self.valid))
        if self.num_chains and np.all(self.diverged):
            steps = ", ".join(
                f"chain {c} at step {int(t)}" for c, t in enumerate(self.divergence_step)
            )
            warnings.warn(
                f"every chain diverged ({steps}): the draws of samples.flat() "
                "are those of failing chains"
                + (f", {after} of them repeats after the divergence" if frozen and after else "")
                + "; results computed from them are not posterior draws. docs/troubleshooting.md "
                "says what to change.",
                DivergenceWarning,
                stacklevel=2,
            )
        elif frozen and after:
            bad = np.flatnonzero(self.diverged).tolist()
            warnings.warn(
                f"samples.flat(frozen=True) includes {after} draws taken after their chain "
                f"diverged (chains {bad}), repeats of its last finite state: results computed "
                "from them are not posterior draws. samples.flat() leaves them out.",
                DivergenceWarning,
                stacklevel=2,
            )
        if healthy or frozen or not np.any(self.diverged):
            return flat
        valid = self.valid.reshape(-1)
        return jax.tree.map(lambda a: a[valid], flat)

    def posterior_names(self) -> dict[str, list[str]]:
        """ArviZ/NetCDF variable name → the path of the draws it holds, ``[what, *keys]``.

        A position leaf is named by its keys joined with ``.`` (``net.Dense_0.kernel``), an
        ``extra`` leaf by the entry's name and its keys (``guide.net.Dense_0.kernel``); keys are
        escaped as :mod:`bdl.sampling.kept.names` says, so names never hold ``/``. A position that
        is a bare array is named ``position``.

        Returns:
            The names, in the order of the leaves.

        Raises:
            ValueError: two leaves would get the same name.
        """
        return {name: path for name, path, _ in self._posterior()}

    def _posterior(self) -> list[tuple[str, list[str], Any]]:
        out, seen = [], {}
        for what, tree in {"position": self.positions, **self.extra}.items():
            for keys, leaf in zip(leaf_keys(tree), jax.tree.leaves(tree), strict=True):
                name = posterior_name(what, keys)
                if name in seen:
                    raise ValueError(
                        f"Samples: the draws at {[what, *keys]} and {seen[name]} would share "
                        f"the ArviZ/NetCDF variable name {name!r}; rename the extra entry "
                        f"{what!r} or the position's key."
                    )
                seen[name] = [what, *keys]
                out.append((name, [what, *keys], leaf))
        return out

    def named(self, compiled: Any) -> dict[str, np.ndarray]:
        """The draws in the model's own constrained parameters, by name (``net/w``,
        ``lik/scale`` as σ rather than log σ, ``lik/weights`` on the simplex…), each
        ``(chains, draws, ...)``: every draw mapped through ``compiled``'s bijectors
        (:func:`bdl.compile.named_draws.named_draws`).

        Args:
            compiled: the compiled model the draws came from.

        Returns:
            A dict from parameter name to its constrained draws.
        """
        from bdl.compile.named_draws import named_draws  # NumPyro's bijectors, on first use

        return named_draws(compiled, self.positions)

    def to_arviz(self, compiled: Any = None) -> Any:
        """An ArviZ ``InferenceData``: the posterior group has one variable per leaf, named as
        :meth:`posterior_names` says (NetCDF-safe: ``to_netcdf`` accepts it), and sample_stats
        holds ``info`` and ``diverging`` (draws taken after their chain diverged). Given the
        compiled model, the posterior group holds the constrained draws of :meth:`named`
        instead (``lik/scale`` as the variable ``lik.scale``).

        Args:
            compiled: the compiled model the draws came from (optional).

        Returns:
            The ``arviz.InferenceData``.
        """
        import arviz as az

        if compiled is not None:
            posterior = {k.replace("/", "."): v for k, v in self.named(compiled).items()}
        else:
            posterior = {name: np.asarray(leaf) for name, _, leaf in self._posterior()}
        stats = {k: np.asarray(v) for k, v in self.info.items()}
        stats["diverging"] = ~self.valid
        return az.from_dict(posterior=posterior, sample_stats=stats)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the draws and everything else held here to ``path`` (``.npz`` or ``.nc``),
        atomically; read them back with :func:`bdl.load_samples`. Layout: [Saving
        runs](../saving.md).

        Args:
            path: the file to write: its suffix, ``.npz`` (NumPy) or ``.nc`` (netCDF, which
                ArviZ reads), picks the format; its folder must exist.

        Returns:
            The path written.

        Raises:
            ValueError: a suffix other than ``.npz`` or ``.nc``, a folder that does not exist
                (or is a file), or two leaves of the positions that would share a name.
            TypeError: ``path`` is neither a string nor a path.

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
            >>> import tempfile, pathlib
            >>> kernel = bdl.kernels.get("sghmc", step_size=0.01)
            >>> samples = bdl.sample(compiled, kernel, num_steps=60, burn_in=20, num_chains=2)
            >>> path = samples.save(pathlib.Path(tempfile.mkdtemp()) / "run.npz")
            >>> path.name
            'run.npz'
            >>> bdl.load_samples(path)
            Samples(kernel='sghmc', chains=2, draws=40, steps_done=60, NOT converged)
        """
        return save_samples(self, path)

    def report(
        self,
        path: str | os.PathLike,
        target: Any = None,
        *,
        validation: Any = None,
        quantities: int = 6,
    ) -> Path:
        """Write the run report: one self-contained HTML file ([the run report](../report.md))
        with the run's settings, the convergence verdict, trace and rank plots of the worst
        quantities by R̂, divergences and run-aways, the adapted hyper-parameters, kinetic and
        configurational temperatures and, where they apply, the comparison with NUTS and the
        held-out BMA.

        Args:
            path: the ``.html`` file to write.
            target: the compiled model the draws came from (a network's function-space traces,
                the configurational temperature and the held-out BMA need it).
            validation: what :func:`bdl.validate` returned, to add the comparison with NUTS.
            quantities: how many quantities (the worst by R̂) to plot.

        Returns:
            the path written.
        """
        from bdl.report.write import write_report

        return write_report(self, path, target=target, validation=validation, quantities=quantities)

    def __repr__(self) -> str:
        state = ", interrupted" if self.interrupted else ""
        if np.any(self.diverged):
            state += f", diverged={np.flatnonzero(self.diverged).tolist()}"
        if np.any(self.runaway):
            state += f", runaway={np.flatnonzero(self.runaway).tolist()}"
        if self.convergence is not None:
            state += ", converged" if self.convergence.mixing_ok else ", NOT converged"
            state += ", biased" if self.convergence.biased else ""
        draws = self.num_draws if self.kept_draws else "not kept"
        return (
            f"Samples(kernel={self.kernel!r}, chains={self.num_chains}, "
            f"draws={draws}, steps_done={self.steps_done}{state})"
        )
