#!/usr/bin/env bash
# The tree a device call carries must stay under 64 MiB with .whl (~26 MB); the committed evidence
# stores and tarballs under docs/results/ (MLflow .db files, artifact .tgz) are most of the tracked
# bytes and no device part reads them. Run from the repository root:
#   bash docs/results/device-tree.sh aside   # move them to /tmp/eaq-aside (same paths), print the size that travels
#   bash docs/results/device-tree.sh back    # put them back (git status is clean again)
set -euo pipefail
aside=${ASIDE:-/tmp/eaq-aside}
case ${1:-} in
  aside)
    git ls-files -z 'docs/results/**.db' 'docs/results/**.tgz' | while IFS= read -r -d '' f; do
      [[ -e $f ]] || continue
      mkdir -p "$aside/$(dirname "$f")" && mv "$f" "$aside/$f"
    done
    # du skips the files moved aside (and says so on stderr, with a failing status: not an error here)
    tracked=$( (git ls-files -z | xargs -0 du -cb 2>/dev/null || true) | tail -1 | cut -f1)
    untracked=$( (git ls-files -z --others --exclude-standard | xargs -0 -r du -cb 2>/dev/null || true) | tail -1 | cut -f1)
    whl=$(du -sb .whl 2>/dev/null | cut -f1)
    echo "travels: tracked $tracked + untracked ${untracked:-0} + .whl ${whl:-0} = $((tracked + ${untracked:-0} + ${whl:-0})) bytes (limit $((64 * 1024 * 1024)))"
    ;;
  back)
    [[ -d $aside ]] || { echo "nothing aside in $aside"; exit 0; }
    (cd "$aside" && find . -type f -print0) | while IFS= read -r -d '' f; do
      mkdir -p "$(dirname "$f")" && mv "$aside/$f" "$f"
    done
    rm -rf "$aside"
    git status --short
    ;;
  *) echo "usage: bash docs/results/device-tree.sh aside|back" >&2; exit 2 ;;
esac
