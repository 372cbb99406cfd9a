#!/usr/bin/env bash
# Starts a private MariaDB that only accepts TLS, for the state store's MySQL TLS test
# (autoscaler-state/tests/tls.rs). The machine's own MariaDB on 3306 runs without TLS and is
# shared, so it is left alone: this one has its own data directory, binds 127.0.0.1:3307, and
# serves a certificate signed by a CA made here. Prints the two variables the test reads:
#   AUTOSCALER_TEST_MYSQL_TLS_URL  a URL of the server without any TLS parameters
#   AUTOSCALER_TEST_MYSQL_TLS_CA   the CA certificate (PEM) that signed the server's
# Usage: eval "$(bash .ci/mariadb-tls.sh)". Idempotent: a server it started before is reused.
set -euo pipefail
port="${MARIADB_TLS_PORT:-3307}"
dir="${TMPDIR:-/tmp}/flink-autoscaler-mariadb-tls"
url="mysql://root@127.0.0.1:${port}/test"

ready() {
  mariadb --no-defaults -uroot -h127.0.0.1 -P"$port" --ssl --ssl-ca="$dir/ca.pem" \
    --connect-timeout=2 -e "CREATE DATABASE IF NOT EXISTS test" >/dev/null 2>&1
}

if [ -f "$dir/ca.pem" ] && ready; then
  echo "export AUTOSCALER_TEST_MYSQL_TLS_URL='$url' AUTOSCALER_TEST_MYSQL_TLS_CA='$dir/ca.pem'"
  exit 0
fi
for tool in mariadbd mariadb-install-db mariadb openssl; do
  command -v "$tool" >/dev/null || { echo "mariadb-tls: $tool is not installed" >&2; exit 1; }
done
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=flink-autoscaler test CA" \
  -keyout ca.key -out ca.pem 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr 2>/dev/null
printf '%s\n' "subjectAltName=DNS:localhost,IP:127.0.0.1" "basicConstraints=CA:FALSE" \
  "keyUsage=digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 \
  -extfile server.ext -out server.pem 2>/dev/null
mariadb-install-db --no-defaults --datadir="$dir/data" --auth-root-authentication-method=normal \
  --skip-test-db --user="$(id -un)" > install.log 2>&1 || { cat install.log >&2; exit 1; }
# setsid: the server outlives this script, and is not killed with the CI step's process group.
setsid mariadbd --no-defaults --datadir="$dir/data" --user="$(id -un)" --bind-address=127.0.0.1 \
  --port="$port" --socket="$dir/sock" --pid-file="$dir/pid" --log-error="$dir/error.log" \
  --skip-name-resolve --ssl-ca="$dir/ca.pem" --ssl-cert="$dir/server.pem" --ssl-key="$dir/server.key" \
  --require-secure-transport=ON < /dev/null > /dev/null 2>&1 &
for _ in $(seq 1 60); do
  if ready; then
    echo "export AUTOSCALER_TEST_MYSQL_TLS_URL='$url' AUTOSCALER_TEST_MYSQL_TLS_CA='$dir/ca.pem'"
    exit 0
  fi
  sleep 0.5
done
echo "mariadb-tls: the server did not come up on 127.0.0.1:$port" >&2
tail -n 20 "$dir/error.log" >&2 || true
exit 1
