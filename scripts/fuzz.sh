#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a short time each
# (FUZZTIME, default 5s): the seed corpora plus a brief exploration.
set -euo pipefail
fuzztime=${FUZZTIME:-5s}
cd "$(dirname "$0")/.."
status=0
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  echo "fuzz $pkg $name ($fuzztime)"
  if ! go test -count=1 -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$pkg" >/tmp/rgit-fuzz.log 2>&1; then
    cat /tmp/rgit-fuzz.log; status=1
  fi
done < <(grep -rHoE --include='*_test.go' '^func (Fuzz[A-Za-z0-9_]+)' . | sed -E 's#^\./##; s#:func #:#' | sort)
exit $status
