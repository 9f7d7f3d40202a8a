"""Write bdl/kernels/verdicts.json: the stationarity checker's verdict on every registered kernel.

Run after changing a kernel, its registered defaults or the checker (about a minute on 2 CPU
cores); ``bdl kernels`` shows these verdicts, and tests/test_kernels_cli.py checks that every
registered kernel has one and that they agree with a fresh check.

    .venv/bin/python scripts/kernel_verdicts.py
"""

from __future__ import annotations

import sys

from bdl.kernels.verdicts import SHIPPED_PATH, write_shipped


def main() -> int:
    entries = write_shipped()
    for name, entry in entries.items():
        why = f" ({'; '.join(entry['reasons'])})" if entry["reasons"] else ""
        print(f"{name:<14}{entry['verdict']}{why}")
    print(f"written to {SHIPPED_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
