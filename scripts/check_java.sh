#!/usr/bin/env bash
# Spark 4 needs Java 17 or newer. Stop early with the package to install, rather than
# letting PySpark fail later with a JVM gateway error.
set -euo pipefail
if ! command -v java >/dev/null 2>&1; then
  echo "error: java was not found. Spark needs Java 17 or newer." >&2
  echo "       On Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless" >&2
  exit 1
fi
version_line=$(java -version 2>&1 | head -n 1)
major=$(echo "$version_line" | sed -E 's/.*version "([0-9]+)(\.[0-9]+)*.*/\1/')
if [ "$major" = "1" ]; then  # Java 8 and older say 1.8.0
  major=8
fi
if ! [ "$major" -ge 17 ] 2>/dev/null; then
  echo "error: Spark needs Java 17 or newer; found: $version_line" >&2
  echo "       On Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless" >&2
  exit 1
fi
