"""Nine posteriors of posteriordb, declared in bdl's DSL, with Stan's reference draws.

posteriordb (Magnusson, Bürkner & Vehtari; BSD-3-Clause, licence and attribution in
``vendored/``) pairs Stan programs and data with reference draws of Stan's NUTS (10 chains of
1,000 draws, thinned to near independence). Each posterior here is declared as its Stan program
states it — the same parameters, constraints, priors and likelihood — and
:meth:`Posterior.reference` turns Stan's draws into a :class:`bdl.validation.Reference`, so that
``bdl.validate(compiled, kernel, reference=...)`` judges a kernel against Stan with bdl's gates.
The two ODE posteriors need the optional solver diffrax (``pip install 'bdl-sgmcmc[ode]'``).

    >>> from bdl.validation import posteriordb
    >>> posterior = posteriordb.load("earnings-earn_height")
    >>> compiled = posterior.spec().compile()
    >>> posterior.reference(compiled).positions["net"]["beta"].shape
    (10, 1000, 2)

``scripts/posteriordb_suite.py`` runs NUTS and every adapting kernel on all nine and writes
[the posteriordb page](../posteriordb.md).
"""

from bdl.validation.posteriordb.catalogue import Posterior, load, names
from bdl.validation.posteriordb.ode import require_diffrax, solve

__all__ = ["Posterior", "load", "names", "require_diffrax", "solve"]
