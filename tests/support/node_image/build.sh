#!/bin/bash
# Builds (once, cached by content) a node image for tests: a tar of a
# Debian bookworm minbase root with systemd and python3 (the test stack's
# interpreter), for a bundle's nspawn mode (stack.json "root"). It carries
# a mark, /usr/share/stratum-node-image, that the host's /usr does not: a
# stack whose probe finds it runs on the image's userland, not the host's.
#
#   build.sh         prints the path of the tar
#
# Cached in $STRATUM_VM_CACHE (default /var/cache/stratum-test-vm) beside
# the VM image, keyed by a hash of this script and the package versions.
# Missing tools exit 3 with the package to install.
set -euo pipefail
cache=${STRATUM_VM_CACHE:-/var/cache/stratum-test-vm}
log() { printf '[node-image] %s\n' "$*" >&2; }
command -v mmdebstrap >/dev/null || {
  echo "missing mmdebstrap (Debian package mmdebstrap)" >&2
  exit 3
}
packages=systemd-sysv,python3
versions=$(apt-cache policy systemd python3 2>/dev/null | sed -n 's/^ *Candidate: //p' | tr '\n' ' ')
key=$(cat "$0" <(echo "$packages $versions") | sha256sum | cut -c1-16)
out=$cache/node-image-$key.tar
if [ -f "$out" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$cache"
tmp=$(mktemp "$cache/.node-image-XXXXXX.tar")
trap 'rm -f "$tmp"' EXIT
log "mmdebstrap bookworm minbase: $packages"
mmdebstrap --quiet --variant=minbase --include="$packages" --mode=root \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook='echo stratum-test-node-image >"$1/usr/share/stratum-node-image"' \
  bookworm "$tmp" >&2
mv "$tmp" "$out"
trap - EXIT
echo "$out"
