"""The model files shipped with bdl, run by name: ``bdl sample linear_regression``.

Each file defines ``build(**options) -> bdl.ModelSpec`` and is loaded by path with
:func:`bdl.model_files.load_spec` (never imported as a module of bdl), so a copy saved as
``./models/NAME.py`` in the working directory runs the same way and takes precedence over the
shipped file of that name (docs/models.md, "How `bdl sample MODEL` finds a model").

Each file is an example that is read, and copied, on its own: the files share no code but bdl's,
so their ``bdl.Model`` and ``bdl.ModelSpec`` declarations read alike, each in full.
"""
