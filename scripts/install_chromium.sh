#!/usr/bin/env bash
# Install a headless Chromium for the browser tests (tests/browser.py), where this can be done.
#
# Playwright (the docs extra) drives it; Playwright's own `playwright install` is not used, since
# it downloads its browser from a host that is not a package registry. Debian's
# chromium-headless-shell is: apt-get installs it when we are root (or have password-less sudo).
# Anywhere else nothing is installed, and the browser tests are skipped with the reason. Set
# BDL_CHROMIUM to use another Chromium executable. Never fails the caller.
set -uo pipefail
if [ -n "${BDL_CHROMIUM:-}" ]; then exit 0; fi
for name in chromium-headless-shell chromium chromium-browser google-chrome-stable google-chrome; do
  if command -v "$name" >/dev/null 2>&1; then exit 0; fi
done
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_chromium: no apt-get; the browser tests will be skipped" >&2
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  echo "install_chromium: not root; the browser tests will be skipped" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if ! { "${SUDO[@]}" apt-get update -qq && "${SUDO[@]}" apt-get install -y -qq chromium-headless-shell; } \
    >/tmp/bdl-install-chromium.log 2>&1; then
  echo "install_chromium: apt-get failed (/tmp/bdl-install-chromium.log); the browser tests" \
    "will be skipped" >&2
fi
exit 0
