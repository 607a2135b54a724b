#!/bin/bash
# Builds the example node stack bundle from this machine's Debian packages
# only: containerd and runc (the container runtime), etcd, and a kubelet
# stand-in (python3) that keeps a container running which reads a volume
# mounted under /var/lib/kubelet/pods. The container's image is an OCI image
# built here, offline, from busybox-static.
#
#   build.sh OUT [VERSION]     writes the bundle (both modes) to OUT, made with
#                              `stratum bundle make` ($STRATUM, default: stratum)
#
# With KUBELET=PATH (a kubelet v1.26 binary; no Debian release ships one,
# so it is built from source), it builds the Kubernetes worker stack
# instead: containerd with its CRI plugin and systemd cgroups, runc, CNI
# from containernetworking-plugins, a pause image built here, kubelet with
# a KubeletConfiguration, its pods' kubepods.slice among the workloads and
# its /healthz as the health; the node's kubeconfig is read from state
# (/var/lib/kubelet/kubeconfig, provisioned once per node; `node install
# --adopt-state /var/lib/kubelet`). No etcd: the control plane is elsewhere.
#
# With NODE_IMAGE=TAR, nspawn mode carries that root tree (a node image with
# systemd, python3 and util-linux's mount: e.g. a Debian minbase made by
# mmdebstrap) as rootfs.tar, stack.json's "root": its machine then runs on
# the image's userland instead of the host's /usr.
#
# Missing packages exit 3, naming them. Sign it as any bundle:
#   stratum bundle sign OUT --key signing.pem
set -euo pipefail
out=${1:?usage: build.sh OUT [VERSION]}
version=${2:-1}
here=$(cd "$(dirname "$0")" && pwd)
stratum=${STRATUM:-stratum}

kubelet=${KUBELET:-}
if [ -n "$kubelet" ] && ! "$kubelet" --version 2>/dev/null | grep -q '^Kubernetes v1\.'; then
  echo "build.sh: KUBELET=$kubelet is not a kubelet (its --version does not say Kubernetes v1.x)" >&2
  exit 2
fi
need=(containerd runc etcd-server etcd-client busybox-static python3)
[ -n "$kubelet" ] && need=(containerd runc containernetworking-plugins busybox-static)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "build.sh: missing Debian packages: ${missing[*]} (apt-get install ${missing[*]})" >&2
  exit 3
fi
# The file a package installs, by its name in the package's file list.
pkgfile() { dpkg -L "$1" | grep -E "/s?bin/$2\$" | head -1; }

image=${NODE_IMAGE:-}
if [ -n "$image" ] && ! tar -tf "$image" ./usr/lib/systemd/systemd >/dev/null 2>&1; then
  echo "build.sh: NODE_IMAGE $image is not a tar of a root tree with /usr/lib/systemd/systemd" >&2
  exit 2
fi
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "build.sh: $out exists and is not empty" >&2
  exit 2
fi
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The OCI image (an image layout in a tar): busybox and the links the
# container's command uses, one layer, made reproducibly.
arch=$(dpkg --print-architecture)
mkdir -p "$work/layer/bin" "$work/layer/tmp" "$work/oci/blobs/sha256"
cp "$(pkgfile busybox-static busybox)" "$work/layer/bin/busybox"
for l in sh cat sleep ls; do ln -s busybox "$work/layer/bin/$l"; done
chmod 1777 "$work/layer/tmp"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work/layer" -cf "$work/layer.tar" .
blob() { # FILE -> stores it, prints "sha256:HEX SIZE"
  local d
  d=$(sha256sum "$1" | cut -d' ' -f1)
  cp "$1" "$work/oci/blobs/sha256/$d"
  echo "sha256:$d $(stat -c %s "$1")"
}
read -r layer_digest layer_size < <(blob "$work/layer.tar")
# oci_image NAME REF CMD_JSON OUT: an OCI image layout tar of the busybox layer.
oci_image() {
  rm -rf "$work/oci/index.json" "$work/oci/oci-layout"
  printf '{"architecture":"%s","os":"linux","config":{"Cmd":%s},"rootfs":{"type":"layers","diff_ids":["%s"]}}' \
    "$arch" "$3" "$layer_digest" >"$work/config.json"
  read -r config_digest config_size < <(blob "$work/config.json")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"%s","size":%s}]}' \
    "$config_digest" "$config_size" "$layer_digest" "$layer_size" >"$work/manifest.json"
  read -r manifest_digest manifest_size < <(blob "$work/manifest.json")
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$manifest_digest" "$manifest_size" "$arch" "$1" "$2" >"$work/oci/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$work/oci/oci-layout"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work/oci" -cf "$4" .
  rm -rf "$work/oci/blobs/sha256/${config_digest#sha256:}" "$work/oci/blobs/sha256/${manifest_digest#sha256:}"
}
oci_image stratum.local/busybox:1 1 '["/bin/sh"]' "$work/busybox-oci.tar"
# The pod sandbox ("pause") image kubelet's pods share: it waits for a
# signal, and nothing is ever pulled (an air-gapped node).
oci_image stratum.local/pause:1 1 '["/bin/sh","-c","trap \"exit 0\" TERM INT; while :; do sleep 3600 \u0026 wait; done"]' \
  "$work/pause-oci.tar"

if [ -n "$kubelet" ]; then
  # shellcheck source=kubelet-stack.sh
  . "$here/kubelet-stack.sh"
  $stratum bundle make "$out" --version "$version" >&2
  echo "$out"
  exit 0
fi

for mode in host nspawn; do
  m=$out/$mode
  mkdir -p "$m/opt/node/bin" "$m/opt/node/etc" "$m/opt/node/lib" "$m/opt/node/image"
  for b in containerd:containerd containerd:containerd-shim-runc-v2 containerd:ctr runc:runc \
    etcd-server:etcd etcd-client:etcdctl; do
    cp "$(pkgfile "${b%%:*}" "${b##*:}")" "$m/opt/node/bin/${b##*:}"
  done
  cp "$here/kubelet-standin.py" "$m/opt/node/lib/kubelet-standin.py"
  cp "$here/node-check" "$m/opt/node/lib/node-check"
  cp "$here/containerd.toml" "$m/opt/node/etc/containerd.toml"
  cp "$work/busybox-oci.tar" "$m/opt/node/image/busybox-oci.tar"
  # What the host's kernel must give a container runtime (stratum applies
  # them when it prepares the slot and puts them back on a rollback).
  mkdir -p "$m/host-files"
  printf 'overlay\nbr_netfilter\n' >"$m/host-files/modules.conf"
  # kubelet's own kernel settings too: it sets them at start and cannot in
  # a machine (read-only /proc/sys), so they are set on the host first.
  printf '%s\n' 'net.ipv4.ip_forward = 1' 'net.bridge.bridge-nf-call-iptables = 1' \
    'vm.overcommit_memory = 1' 'vm.panic_on_oom = 0' 'kernel.panic = 10' 'kernel.panic_on_oops = 1' \
    'kernel.keys.root_maxkeys = 1000000' 'kernel.keys.root_maxbytes = 25000000' \
    >"$m/host-files/sysctl.conf"
  # The pod's container lives under kubepods.slice, as kubelet places pods
  # (a scope of the node's systemd, outside containerd's unit; in nspawn
  # mode inside the machine): declared, so stopping the slot stops it.
  workloads='"workloads": ["/kubepods.slice"],'
  # Every other container containerd runs, in any namespace or cgroup
  # (kubelet's pods in k8s.io, the operator's own): found by their root file
  # systems under its state directory, and stopped with a host-mode slot.
  runtime='"runtime": {"kind": "containerd", "state": "/run/containerd"},'
  root=''
  if [ "$mode" = nspawn ] && [ -n "$image" ]; then
    cp "$image" "$m/rootfs.tar"
    root='"root": "rootfs.tar",'
  fi
  # kubelet reads the kernel log; an nspawn machine has it only when asked.
  grants=
  [ "$mode" = nspawn ] && grants='"grants": ["kernel-log"],'

  cat >"$m/stack.json" <<JSON
{
  "services": [
    {
      "name": "containerd",
      "exec": ["/usr/bin/env", "PATH=\${SLOT}/opt/node/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "\${SLOT}/opt/node/bin/containerd", "--config", "\${SLOT}/opt/node/etc/containerd.toml"],
      "delegate": true
    },
    {
      "name": "etcd",
      "exec": ["\${SLOT}/opt/node/bin/etcd", "--name=\${NODE}", "--data-dir=/var/lib/etcd-node",
        "--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
        "--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
        "--initial-cluster=\${NODE}=http://127.0.0.1:2380", "--log-level=warn"]
    },
    {
      "name": "kubelet",
      "exec": ["/usr/bin/env", "PATH=\${SLOT}/opt/node/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "/usr/bin/python3", "\${SLOT}/opt/node/lib/kubelet-standin.py",
        "--image-tar=\${SLOT}/opt/node/image/busybox-oci.tar", "--node=\${NODE}"],
      "after": ["containerd"]
    }
  ],
  "health": {
    "url": "http://127.0.0.1:2379/health",
    "exec": ["/bin/sh", "\${SLOT}/opt/node/lib/node-check", "\${SLOT}/opt/node/bin"]
  },
  "hostFiles": {
    "/etc/modules-load.d/stratum.conf": "host-files/modules.conf",
    "/etc/sysctl.d/90-stratum.conf": "host-files/sysctl.conf"
  },
  $workloads $runtime $root $grants
  "state": ["/var/lib/containerd", "/var/lib/etcd-node", "/var/lib/kubelet"]
}
JSON
done
$stratum bundle make "$out" --version "$version" >&2
echo "$out"
