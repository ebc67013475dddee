#!/bin/sh
# The test clients from the npm registry, at the versions their lockfiles
# pin (tests/e2e/e2b: the stock E2B SDK; tests/e2e/mcp: the stock MCP
# SDK), installed with `npm ci` before
# the KVM tests, whose test host has no network. Where Node or npm is
# missing or too old, it says so and the tests that need it skip.
set -eu
cd "$(dirname "$0")/.."
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "gantry: SKIP npm test clients: node and npm not found (apt-get install nodejs, 20.18 or later)"
	exit 0
fi
v=$(node --version | sed 's/^v//')
major=${v%%.*}
minor=${v#*.}
minor=${minor%%.*}
if [ "$major" -lt 20 ] || { [ "$major" -eq 20 ] && [ "$minor" -lt 18 ]; } || [ "$major" -eq 21 ]; then
	echo "gantry: SKIP npm test clients: node $v (the e2b SDK needs 20.18 or later)"
	exit 0
fi
for dir in tests/e2e/e2b tests/e2e/mcp; do
	if [ -f "$dir/node_modules/.package-lock.json" ] &&
		cmp -s "$dir/package-lock.json" "$dir/node_modules/.gantry-lock"; then
		continue
	fi
	npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
	cp "$dir/package-lock.json" "$dir/node_modules/.gantry-lock"
done
