#!/bin/bash
# Builds (once, cached by content) what a test node with its own kernel
# boots: a Debian bookworm root image, the Debian kernel, and a busybox
# initramfs that mounts /dev/vda and switches to systemd. Everything comes
# from Debian's packages: mmdebstrap, the kernel package linux-image-amd64
# depends on, busybox-static, kmod, e2fsprogs, cpio.
#
#   build.sh         prints the cache directory holding vmlinuz, initrd.img, base.img
#
# The cache lives outside the repository, in $STRATUM_VM_CACHE (default
# /var/cache/stratum-test-vm), one directory per key: a hash of this script,
# the agent, and the kernel and package versions. Missing tools exit 3 with
# the package to install.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${STRATUM_VM_CACHE:-/var/cache/stratum-test-vm}
log() { printf '[vm-build] %s\n' "$*" >&2; }

for t in mmdebstrap:mmdebstrap qemu-system-x86_64:qemu-system-x86 busybox:busybox-static \
  depmod:kmod cpio:cpio mkfs.ext4:e2fsprogs dpkg-deb:dpkg apt-get:apt; do
  command -v "${t%%:*}" >/dev/null || [ -x "/bin/${t%%:*}" ] || {
    echo "missing ${t%%:*} (Debian package ${t##*:})" >&2
    exit 3
  }
done
busybox=$(command -v busybox || echo /bin/busybox)

kernel_pkg() { apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -1; }
kpkg=$(kernel_pkg)
if [ -z "$kpkg" ]; then
  apt-get update -qq >&2 || true
  kpkg=$(kernel_pkg)
fi
[ -n "$kpkg" ] || {
  echo "cannot tell the kernel package linux-image-amd64 depends on (run apt-get update)" >&2
  exit 3
}
kver=${kpkg#linux-image-}
packages=systemd-sysv,systemd-container,python3,iproute2,util-linux,kmod,udev,etcd-server,etcd-client,iptables,nftables,procps,coreutils
key=$(cat "$0" "$here/agent.py" <(echo "$kpkg $packages") | sha256sum | cut -c1-16)
out=$cache/$key
if [ -f "$out/READY" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/.build-XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$(date +%s)

log "root file system (mmdebstrap bookworm minbase: $packages)"
mmdebstrap --quiet --variant=minbase --include="$packages" --mode=root bookworm "$work/root" >&2

log "kernel $kpkg"
(cd "$work" && apt-get download "$kpkg" >&2)
dpkg-deb -x "$work"/linux-image-*.deb "$work/kernel"
cp "$work/kernel/boot/vmlinuz-$kver" "$work/vmlinuz"
mkdir -p "$work/root/lib/modules"
cp -a "$work/kernel/lib/modules/$kver" "$work/root/lib/modules/"
depmod -b "$work/root" "$kver"

log "node setup: fstab, agent, etcd.service masked"
root=$work/root
cat >"$root/etc/fstab" <<'FSTAB'
/dev/vda / ext4 defaults 0 0
/dev/vdb /srv/payload ext4 ro,nofail 0 0
FSTAB
mkdir -p "$root/srv/payload" "$root/usr/local/lib/stratum-test"
echo stratum-vm >"$root/etc/hostname"
# Debian enables etcd.service: the node's etcd is the stack stratum runs.
ln -sf /dev/null "$root/etc/systemd/system/etcd.service"
ln -sf /dev/null "$root/etc/systemd/system/systemd-timesyncd.service"
ln -sf /dev/null "$root/etc/systemd/system/apt-daily.timer"
ln -sf /dev/null "$root/etc/systemd/system/apt-daily-upgrade.timer"
cp "$here/agent.py" "$root/usr/local/lib/stratum-test/agent.py"
cat >"$root/etc/systemd/system/stratum-test-agent.service" <<'UNIT'
[Unit]
Description=Test agent on ttyS1: runs the host's commands
DefaultDependencies=no
After=local-fs.target
Wants=local-fs.target

[Service]
ExecStart=/usr/bin/python3 /usr/local/lib/stratum-test/agent.py /dev/ttyS1
Restart=always
RestartSec=1

[Install]
WantedBy=multi-user.target
UNIT
ln -sf ../stratum-test-agent.service "$root/etc/systemd/system/multi-user.target.wants/stratum-test-agent.service"

log "initramfs (busybox, virtio and ext4 modules)"
ird=$work/initrd
mkdir -p "$ird/bin" "$ird/m" "$ird/proc" "$ird/sys" "$ird/dev" "$ird/newroot"
cp "$busybox" "$ird/bin/busybox"
: >"$ird/modules"
for m in virtio_pci virtio_blk ext4; do
  modprobe --show-depends -d "$work/root" -S "$kver" "$m" | awk '$1 == "insmod" { print $2 }' |
    while read -r ko; do
      base=$(basename "$ko")
      grep -qx "$base" "$ird/modules" || {
        cp "$ko" "$ird/m/$base"
        echo "$base" >>"$ird/modules"
      }
    done
done
cat >"$ird/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
while read -r m; do insmod "/m/$m" 2>/dev/null; done </modules
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
mount -t ext4 -o rw /dev/vda /newroot || { echo "initramfs: cannot mount /dev/vda"; exec sh; }
mount --move /dev /newroot/dev
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
exec switch_root /newroot /sbin/init
INIT
chmod 755 "$ird/init"
(cd "$ird" && find . | cpio --quiet -o -H newc | gzip -1 >"$work/initrd.img")

log "root image (ext4, 3 GiB sparse)"
mkfs.ext4 -q -F -L stratum-root -d "$root" "$work/base.img" 3G >&2
rm -rf "$root" "$work/kernel" "$work"/linux-image-*.deb "$ird"
date +%s >"$work/READY"
log "built in $(($(date +%s) - start)) s"
mv -T "$work" "$out" 2>/dev/null || true
trap - EXIT
rm -rf "$work"
echo "$out"
