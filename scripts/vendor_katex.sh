#!/usr/bin/env bash
# Copy KaTeX (the npm package `katex`, MIT licence) into docs/assets/katex/, which the
# documentation site serves itself: its pages typeset their maths with it, with no CDN.
#
# Only what the site uses is kept: katex.min.js, katex.min.css, the WOFF2 fonts (every browser
# the site supports picks them before the WOFF and TTF files the stylesheet also names) and the
# licence. Run it to move to another version: bash scripts/vendor_katex.sh 0.19.1
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-0.19.1}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "katex@$version" >/dev/null && tar xzf "katex-$version.tgz")
dist="$work/package/dist"
dest=docs/assets/katex
rm -rf "$dest"
mkdir -p "$dest/fonts"
cp "$dist/katex.min.js" "$dist/katex.min.css" "$dest/"
cp "$dist"/fonts/*.woff2 "$dest/fonts/"
cp "$work/package/LICENSE" "$dest/LICENSE"
cat >"$dest/SOURCE.txt" <<TEXT
KaTeX $version, from the npm package katex@$version (MIT licence: LICENSE), copied by
scripts/vendor_katex.sh: dist/katex.min.js, dist/katex.min.css and the WOFF2 files of
dist/fonts/. docs/assets/katex-render.js typesets the pages' maths with it.
TEXT
echo "KaTeX $version in $dest: $(du -sh "$dest" | cut -f1)"
