# Sourced by build.sh when KUBELET is set: writes the Kubernetes worker
# stack's two mode directories under $out (build.sh made the images in
# $work). The control plane (apiserver, its etcd) is not part of it.
#
# Absolute paths in containerd's CRI config (its CNI directories) differ per
# slot and mode, so containerd-start renders the config with the slot's
# path into /run/stratum-node before it execs containerd. kubelet-start
# imports the bundle's images into containerd's k8s.io namespace once (an
# air-gapped node's preload: kubelet never pulls), then execs kubelet,
# which tells systemd it is ready itself. (v1.26 takes the runtime's socket
# as a flag only: containerRuntimeEndpoint in its config came in v1.27.)

cni=/usr/lib/cni
for mode in host nspawn; do
  m=$out/$mode
  mkdir -p "$m/opt/node/bin" "$m/opt/node/cni/bin" "$m/opt/node/etc/cni" "$m/opt/node/lib" \
    "$m/opt/node/image"
  for b in containerd:containerd containerd:containerd-shim-runc-v2 containerd:ctr runc:runc; do
    cp "$(pkgfile "${b%%:*}" "${b##*:}")" "$m/opt/node/bin/${b##*:}"
  done
  cp "$kubelet" "$m/opt/node/bin/kubelet"
  for p in bridge host-local loopback; do cp "$cni/$p" "$m/opt/node/cni/bin/$p"; done
  cp "$work/busybox-oci.tar" "$work/pause-oci.tar" "$m/opt/node/image/"

  cat >"$m/opt/node/etc/containerd.toml.in" <<'TOML'
# containerd for kubelet: the CRI plugin on, runc with systemd cgroups (as
# kubelet's cgroupDriver), the sandbox image preloaded, CNI from the slot.
version = 2
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "stratum.local/pause:1"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "@SLOT@/opt/node/cni/bin"
    conf_dir = "@SLOT@/opt/node/etc/cni"
TOML

  cat >"$m/opt/node/etc/cni/10-stratum.conflist" <<'JSON'
{
  "cniVersion": "0.4.0",
  "name": "stratum",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "stratum0",
      "isGateway": true,
      "ipMasq": false,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "10.244.0.0/24" }]] }
    }
  ]
}
JSON

  # evictionHard: a test node's small disk would otherwise be under
  # pressure and evict every pod; a production node keeps kubelet's default.
  cat >"$m/opt/node/etc/kubelet-config.yaml" <<'YAML'
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
failSwapOn: false
staticPodPath: /var/lib/kubelet/static-pods
healthzBindAddress: 127.0.0.1
healthzPort: 10248
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: /var/lib/kubelet/pki/ca.crt
authorization:
  mode: Webhook
YAML

  cat >"$m/opt/node/lib/containerd-start" <<'SH'
#!/bin/sh
# containerd-start SLOT: containerd with its config rendered for this slot.
set -eu
slot=${1%/}
mkdir -p /run/stratum-node
sed "s|@SLOT@|$slot|g" "$slot/opt/node/etc/containerd.toml.in" >/run/stratum-node/containerd.toml
exec "$slot/opt/node/bin/containerd" --config /run/stratum-node/containerd.toml
SH

  cat >"$m/opt/node/lib/kubelet-start" <<'SH'
#!/bin/sh
# kubelet-start SLOT NODE: the images preloaded once, then kubelet.
set -eu
slot=${1%/}
ctr="$slot/opt/node/bin/ctr --address /run/containerd/containerd.sock --namespace k8s.io"
for i in $(seq 100); do $ctr version >/dev/null 2>&1 && break; sleep 0.1; done
for img in pause busybox; do
  $ctr images ls -q | grep -qx "stratum.local/$img:1" ||
    $ctr images import "$slot/opt/node/image/$img-oci.tar" >/dev/null
done
exec "$slot/opt/node/bin/kubelet" --config="$slot/opt/node/etc/kubelet-config.yaml" \
  --kubeconfig=/var/lib/kubelet/kubeconfig --hostname-override="$2" \
  --container-runtime-endpoint=unix:///run/containerd/containerd.sock
SH

  cat >"$m/opt/node/lib/node-check" <<'SH'
#!/bin/sh
# The kubelet stack's command probe: containerd answers on its socket.
"${1:?usage: node-check BIN_DIR}/ctr" --address /run/containerd/containerd.sock version >/dev/null ||
  { echo "containerd does not answer on its socket"; exit 1; }
SH

  # The host kernel as kubelet wants it. Its container manager sets these
  # sysctls itself and will not start when it cannot ("Failed to start
  # ContainerManager" ... "open /proc/sys/vm/overcommit_memory: read-only
  # file system" in the machine, whose /proc/sys is read-only): stratum
  # applies them on the host when it prepares the slot, so kubelet finds
  # them already set in both modes.
  mkdir -p "$m/host-files"
  printf 'overlay\nbr_netfilter\n' >"$m/host-files/modules.conf"
  cat >"$m/host-files/sysctl.conf" <<'CONF'
net.ipv4.ip_forward = 1
net.bridge.bridge-nf-call-iptables = 1
vm.overcommit_memory = 1
vm.panic_on_oom = 0
kernel.panic = 10
kernel.panic_on_oops = 1
kernel.keys.root_maxkeys = 1000000
kernel.keys.root_maxbytes = 25000000
CONF
  grants=
  [ "$mode" = nspawn ] && grants='"grants": ["kernel-log"],'
  root=
  if [ "$mode" = nspawn ] && [ -n "$image" ]; then
    cp "$image" "$m/rootfs.tar"
    root='"root": "rootfs.tar",'
  fi
  cat >"$m/stack.json" <<JSON
{
  "services": [
    {
      "name": "containerd",
      "exec": ["/usr/bin/env", "PATH=\${SLOT}/opt/node/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "/bin/sh", "\${SLOT}/opt/node/lib/containerd-start", "\${SLOT}"],
      "delegate": true
    },
    {
      "name": "kubelet",
      "exec": ["/usr/bin/env", "PATH=\${SLOT}/opt/node/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "/bin/sh", "\${SLOT}/opt/node/lib/kubelet-start", "\${SLOT}", "\${NODE}"],
      "after": ["containerd"]
    }
  ],
  "health": {
    "url": "http://127.0.0.1:10248/healthz",
    "exec": ["/bin/sh", "\${SLOT}/opt/node/lib/node-check", "\${SLOT}/opt/node/bin"]
  },
  "hostFiles": {
    "/etc/modules-load.d/stratum.conf": "host-files/modules.conf",
    "/etc/sysctl.d/90-stratum.conf": "host-files/sysctl.conf"
  },
  "workloads": ["/kubepods.slice"],
  "runtime": {"kind": "containerd", "state": "/run/containerd"},
  $root $grants
  "state": ["/var/lib/containerd", "/var/lib/kubelet"]
}
JSON
done
