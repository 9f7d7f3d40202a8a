"""The validation suite behind ``scripts/validation_suite.py``: its cases (:mod:`suite`) and the
page it writes, docs/validation.md (:mod:`report`). Built on the library API ``bdl.validate``."""
