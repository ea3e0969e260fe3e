#!/usr/bin/env bash
# redismodule.h (the Redis module API header) is in no Debian binary package: take it from Debian's redis
# *source* package, with a private apt state so the system's sources stay untouched. Idempotent: does nothing
# when the header is already there. Usage: scripts/fetch-redismodule-h.sh [DEST_DIR] (default .deps/include)
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-.deps/include}
[ -s "$dest/redismodule.h" ] && exit 0
mkdir -p "$dest"
A=$(mktemp -d)
trap 'rm -rf "$A"' EXIT
mkdir -p "$A"/{parts,lists/partial,cache/archives/partial,dl}
# deb-src twins of the machine's own apt sources (no host is named here)
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources > "$A/parts/src.sources"
else
  sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > "$A/parts/src.list"
fi
O=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$A/parts" -o "Dir::State::Lists=$A/lists"
   -o "Dir::Cache=$A/cache" -o APT::Sandbox::User=root)
apt-get "${O[@]}" update -qq
(cd "$A/dl" && apt-get "${O[@]}" source --download-only -qq redis >/dev/null)
tar -xzf "$A"/dl/redis_*.orig.tar.gz -O --wildcards '*/src/redismodule.h' > "$dest/redismodule.h.tmp"
mv "$dest/redismodule.h.tmp" "$dest/redismodule.h"
echo "fetch-redismodule-h: $dest/redismodule.h"
