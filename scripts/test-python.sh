#!/usr/bin/env bash
# The Python client's tests (clients/python) with Debian's interpreter and packages: no
# Python package index is reachable here. Says what to install when a module is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "test:python: no Python interpreter at $PYTHON." >&2
  echo "  Install it with: apt-get install python3 python3-httpx python3-pytest python3-pytest-asyncio" >&2
  exit 1
fi
missing=$("$PYTHON" - <<'PY'
import importlib.util
wanted = {"httpx": "python3-httpx", "pytest": "python3-pytest", "pytest_asyncio": "python3-pytest-asyncio"}
print(" ".join(pkg for mod, pkg in wanted.items() if importlib.util.find_spec(mod) is None))
PY
)
if [ -n "$missing" ]; then
  echo "test:python: $PYTHON lacks the packages: $missing" >&2
  echo "  Install them with: apt-get install python3-httpx python3-pytest python3-pytest-asyncio" >&2
  echo "  (or, with a package index: pip install 'httpx>=0.23,<1' pytest pytest-asyncio)" >&2
  exit 1
fi
exec "$PYTHON" -m pytest clients/python/tests -q -p no:cacheprovider "$@"
