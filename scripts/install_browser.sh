#!/usr/bin/env bash
# The UI end-to-end tests drive Debian's Chromium through Playwright. Playwright's own browser
# download (`playwright install`) cannot reach its servers from CI or the build machines, so
# the browser comes from the system's package manager instead. Idempotent: does nothing when
# the browser is already there.
set -euo pipefail
CHROMIUM=${LAKEHOUSE_CHROMIUM:-/usr/bin/chromium}
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "error: $CHROMIUM is missing; the browser tests need Debian's chromium package." >&2
  echo "       Install it: sudo apt-get update && sudo apt-get install -y chromium" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: $CHROMIUM is missing and apt-get is not available; install Chromium at $CHROMIUM" >&2
  echo "       (or point LAKEHOUSE_CHROMIUM at a Chromium binary)." >&2
  exit 1
fi
echo "Installing Debian's chromium for the browser tests ..." >&2
# Quiet and non-interactive: CI has no terminal, and apt's progress would swamp its log.
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
if [ ! -x "$CHROMIUM" ]; then
  echo "error: installed chromium, but $CHROMIUM is still missing" >&2
  exit 1
fi
