#!/usr/bin/env bash
# Builds and runs a crate outside the workspace that depends on autoscaler-core and
# autoscaler-state by path with `default-features = false` (in-memory store, no standalone loop),
# and fails if it needs more than MAX_PACKAGES packages (every package of its Cargo.lock, itself
# included, all platforms). Offline once the registry cache holds the dependencies: the
# workspace's Cargo.lock pins the versions already fetched.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
max_packages="${MAX_PACKAGES:-60}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/src"
sed "s#@ROOT@#$root#g" "$root/.ci/embed/Cargo.toml.in" >"$dir/Cargo.toml"
cp "$root/.ci/embed/src/main.rs" "$dir/src/main.rs"
cp "$root/Cargo.lock" "$dir/Cargo.lock"
cd "$dir"
# Resolving prunes the workspace's lock to what this crate uses; offline first, online if the
# cache lacks something (a fresh machine).
cargo update --workspace --offline --quiet 2>/dev/null || cargo update --workspace --quiet
packages="$(grep -c '^\[\[package\]\]' Cargo.lock)"
echo "embedding crate: $packages packages in Cargo.lock (at most $max_packages)"
cargo tree --edges normal --prefix none --offline | sed 's/ (\*)$//' | sort -u >"$dir/tree.txt"
echo "embedding crate: $(wc -l <"$dir/tree.txt") packages built for this platform"
if grep -qE '^(sqlx|tokio-macros|mio) ' "$dir/tree.txt"; then
  echo "the in-memory embedding pulls a database driver or an I/O runtime:" >&2
  grep -E '^(sqlx|tokio-macros|mio) ' "$dir/tree.txt" >&2
  exit 1
fi
if [ "$packages" -gt "$max_packages" ]; then
  echo "the in-memory embedding needs $packages packages, more than $max_packages" >&2
  exit 1
fi
cargo run --offline --quiet
