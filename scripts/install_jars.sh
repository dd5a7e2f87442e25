#!/usr/bin/env bash
# The lakehouse's JVM jars (jars/pom.xml: Delta Lake's connector, S3A), resolved with the
# machine's Maven into jars/lib/ and checked against the SHA-256 sums committed in
# jars/SHA256SUMS. Spark's own spark.jars.packages (Ivy) is not used: it resolves on every JVM
# start and does not read Maven's settings. An air-gapped site puts the files SHA256SUMS names
# into jars/lib/ (or into the folder LAKEHOUSE_DELTA_JARS names) by its own means; this script
# then only checks them.
#
# With a folder argument (`install_jars.sh jars/s3-server`), the same for that folder's pom.xml
# into its lib/: the tests' S3-API server.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
  cd "$1"
  lib=lib
else
  cd jars
  lib=${LAKEHOUSE_DELTA_JARS:-lib}
fi

matches() {
  [ -d "$lib" ] && (cd "$lib" && sha256sum --quiet --check "$OLDPWD/SHA256SUMS") >/dev/null 2>&1
}

if ! matches; then
  command -v mvn >/dev/null || {
    echo "error: mvn not found: install Maven (Debian: apt-get install maven) to resolve the jars of $PWD," \
         "or put the jars its SHA256SUMS lists into $lib yourself" >&2
    exit 1
  }
  echo "Resolving the jars of $PWD/pom.xml with Maven into $lib ..."
  rm -rf "$lib"
  mvn --batch-mode --quiet -Dstyle.color=never -f pom.xml dependency:copy-dependencies -DoutputDirectory="$lib"
  if ! matches; then
    echo "error: the jars Maven resolved into $PWD/$lib do not match its SHA256SUMS:" >&2
    (cd "$lib" && sha256sum --check "$OLDPWD/SHA256SUMS") >&2 || true
    exit 1
  fi
fi
