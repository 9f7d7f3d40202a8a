"""The ``bdl`` command line."""
