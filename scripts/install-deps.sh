#!/usr/bin/env bash
# Install everything stacklab needs on Debian 12, idempotently:
# Debian packages, the Python virtualenv (.venv) and the release build of the engine.
# With --test, also what only the tests use (Chromium for the report's browser test).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  nginx apache2 apache2-utils wrk nghttp2-client
  openssl procps ca-certificates curl pkg-config build-essential
  python3-venv
  php8.2-fpm php8.2-cgi php8.2-cli php8.2-opcache php-apcu
  libapache2-mod-php8.2 libapache2-mod-fcgid libapache2-mpm-itk libapache2-mod-perl2
  lighttpd lighttpd-mod-deflate lighttpd-mod-openssl mini-httpd webfs
  mariadb-server mariadb-client memcached php8.2-mysql php8.2-memcached
  varnish squid haproxy
  xfsprogs btrfs-progs iproute2
  fonts-noto-cjk   # the study report's Chinese section titles (S3) render, not as boxes
  # the real applications, deployed from these packages' files (never their system config)
  wordpress wordpress-theme-twentytwentythree mediawiki phpmyadmin php8.2-mbstring php8.2-xml php8.2-intl php8.2-gd
)
APT_TEST_PACKAGES=(chromium)
if [ "${1:-}" = "--test" ]; then
  APT_PACKAGES+=("${APT_TEST_PACKAGES[@]}")
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: apt packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # The packaged services (nginx, apache2, mariadb, …) must not start: stacklab runs its
  # own instances, and system ones would hold port 80 and take CPU from measurements.
  # A policy-rc.d that says "no" keeps them stopped during the install, unless the
  # machine already has one of its own.
  guard=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    guard=/usr/sbin/policy-rc.d
  fi
  trap '[ -n "$guard" ] && rm -f "$guard"' EXIT
  apt-get update -qq
  apt-get install -y --no-install-recommends "${missing[@]}"
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "install-deps: creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.stacklab-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip
  # Pinned: the versions tested here (constraints.txt), not whatever is newest today.
  .venv/bin/pip install -q -c constraints.txt -e '.[test]'
  touch "$stamp"
fi
# plotly.js's basic bundle for the HTML reports (1.1 MB inlined instead of 4.9)
.venv/bin/python scripts/fetch-plotly-basic.py

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
# The engine is edition 2024 (Rust >= 1.85). Debian 12's own rustc/cargo are 1.63; its
# rustc-web/cargo-web packages (1.96, from bookworm-security) are new enough and
# install /usr/bin/cargo and rustc: used when no new enough toolchain is on PATH.
rust_minor() { cargo --version 2>/dev/null | sed -n 's/^cargo 1\.\([0-9]*\).*/\1/p'; }
if [ "$(rust_minor || true)" = "" ] || [ "$(rust_minor)" -lt 85 ]; then
  echo "install-deps: apt packages: rustc-web cargo-web (Rust >= 1.85 for the engine)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends rustc-web cargo-web
  hash -r
fi
cargo build --release --quiet --manifest-path engine/Cargo.toml
# The engine beside `stacklab` on the virtualenv's PATH (a link: every build is seen).
ln -sf ../../engine/target/release/stacklab-load .venv/bin/stacklab-load
