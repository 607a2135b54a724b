#!/bin/bash
# PID 1 of a private namespace set (unshare --pid --fork --mount --uts --ipc
# --net --mount-proc): prepares a throwaway view of the host and execs a real
# systemd in it. Nothing here may reach the host: / is made rprivate first;
# /run and /tmp are private tmpfs; /etc and /var are overlays whose upper and
# work dirs live on that /run (an upper dir on the host's /tmp does not
# work); units that touch global kernel state or shared dirs are masked.
# Without the private /tmp, the sandbox's tmpfiles-setup empties the host's
# /tmp at boot.
#
# KEEP (colon-separated) names paths under /tmp that must stay visible inside
# (a checkout cloned under /tmp, a Deno install there).
#
# STATE, when set, is a directory on disk that holds the overlays' upper and
# work dirs instead of /run, so a "power cut" (SIGKILL of this systemd, which
# takes every process of the namespace with it) can be followed by a boot of
# the same /etc and /var. UNIT is the unit to boot: sandbox.target (default),
# or multi-user.target to boot as a node does, with every unit the host
# enables masked so that only the sandbox's own (stratum's) start.
set -euo pipefail

mount --make-rprivate /
hostname stratum-sandbox

# Keep the paths that live under /tmp reachable through a bind of the old /tmp.
mkdir -p /mnt
mount --bind /tmp /mnt
mount -t tmpfs -o mode=1777 tmpfs /tmp
IFS=: read -r -a keep <<<"${KEEP:-}"
for p in "${keep[@]}"; do
  case "$p" in /tmp/*) ;; *) continue ;; esac
  mkdir -p "$p"
  mount --bind "/mnt/${p#/tmp/}" "$p"
done

# The host's enabled units, read before the overlay hides which are the host's.
host_wants=$(find /etc/systemd/system -mindepth 2 -maxdepth 2 -path '*.wants/*' -printf '%f\n' |
  grep -v '^stratum' | sort -u || true)

mount -t tmpfs -o mode=755 tmpfs /run
overlays=/run/overlay
if [ -n "${STATE:-}" ]; then overlays=$STATE; fi
for d in etc var; do
  mkdir -p "$overlays/$d/upper" "$overlays/$d/work"
  mount -t overlay overlay \
    -o "lowerdir=/$d,upperdir=$overlays/$d/upper,workdir=$overlays/$d/work" "/$d"
done

mask=(
  systemd-tmpfiles-setup.service systemd-tmpfiles-setup-dev.service
  systemd-tmpfiles-setup-dev-early.service systemd-tmpfiles-clean.timer
  systemd-sysctl.service systemd-modules-load.service
  systemd-udevd.service systemd-udev-trigger.service systemd-udev-settle.service
  systemd-udevd-control.socket systemd-udevd-kernel.socket
  systemd-binfmt.service proc-sys-fs-binfmt_misc.automount proc-sys-fs-binfmt_misc.mount
  systemd-logind.service getty@.service getty.target console-getty.service
  systemd-update-utmp.service systemd-update-utmp-runlevel.service
  systemd-random-seed.service systemd-timesyncd.service cron.service
  systemd-journald-audit.socket systemd-firstboot.service systemd-machine-id-commit.service
  apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer man-db.timer
  dpkg-db-backup.timer
)
unit=${UNIT:-sandbox.target}
if [ "$unit" = multi-user.target ]; then
  # shellcheck disable=SC2206
  mask+=($host_wants dbus.service systemd-user-sessions.service systemd-ask-password-wall.path
    systemd-journal-flush.service systemd-pcrphase-sysinit.service systemd-pcrphase.service
    systemd-repart.service systemd-sysusers.service systemd-ask-password-console.path
    kmod-static-nodes.service)
fi
mkdir -p /etc/systemd/system
for u in "${mask[@]}"; do ln -sf /dev/null "/etc/systemd/system/$u"; done

cat >/etc/systemd/system/sandbox.target <<'UNIT'
[Unit]
Description=Stratum test sandbox
Requires=basic.target
After=basic.target
AllowIsolate=yes
UNIT

exec env container=stratum-test /lib/systemd/systemd --system "--unit=$unit"
