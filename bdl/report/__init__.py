"""The run report: one self-contained HTML file about a run (docs/report.md).

``Samples.report(path)``, ``bdl sample … --report run.html`` and ``bdl validate … --report``
write it with :func:`write_report`: the run's settings and provenance; the convergence verdict
with R̂ and ESS; ArviZ trace and rank plots of the worst quantities by R̂ (function space for
networks), divergences and run-away chains marked; the adapted hyper-parameters per chain;
kinetic and configurational temperature against T with their bands; for a validation, the
kernel's marginals over NUTS's and the pass/fail table; for a model with held-out data, the BMA's
metrics against the number of draws. :data:`SECTIONS` and :data:`FIGURES` name what it holds.
"""

from bdl.report.page import FIGURES, SECTIONS
from bdl.report.write import DEFAULT_QUANTITIES, write_report

__all__ = ["DEFAULT_QUANTITIES", "FIGURES", "SECTIONS", "write_report"]
