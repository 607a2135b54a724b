// The Debian packages the demo and the tests drive for real: the one list
// that `scripts/setup.ts` installs from (the demo, the test task and .ci/run
// all call it) and that the tests name when one is missing.

/** Who needs a package: the demo, the tests (the demo's are the tests' too). */
export type Purpose = "demo" | "test";

/** One Debian package, found by a command on PATH or an absolute path it installs. */
export interface Package {
  readonly name: string;
  /** A command name (looked up on PATH) or an absolute path the package installs. */
  readonly provides: string;
  readonly purposes: readonly Purpose[];
  /** What it is for, in a few words. */
  readonly for: string;
}

const both: readonly Purpose[] = ["demo", "test"];
const test: readonly Purpose[] = ["test"];

export const packages: readonly Package[] = [
  { name: "systemd", provides: "/lib/systemd/systemd", purposes: both, for: "the systemd sandbox" },
  { name: "systemd-container", provides: "systemd-nspawn", purposes: both, for: "nspawn mode" },
  { name: "util-linux", provides: "setpriv", purposes: both, for: "unshare, nsenter, setpriv" },
  { name: "iptables", provides: "iptables", purposes: both, for: "network cleanup" },
  { name: "nftables", provides: "nft", purposes: both, for: "network cleanup" },
  { name: "iproute2", provides: "ip", purposes: both, for: "network cleanup" },
  { name: "python3", provides: "/usr/bin/python3", purposes: both, for: "the test stack" },
  { name: "openssl", provides: "openssl", purposes: both, for: "signing keys, a test CA" },
  { name: "procps", provides: "ps", purposes: both, for: "process checks" },
  { name: "strace", provides: "strace", purposes: test, for: "fsync-order checks" },
  { name: "e2fsprogs", provides: "chattr", purposes: test, for: "immutable-file faults" },
  { name: "cloud-init", provides: "cloud-init", purposes: test, for: "user-data validation" },
  { name: "ansible", provides: "ansible-playbook", purposes: test, for: "the playbooks" },
  { name: "etcd-server", provides: "/usr/bin/etcd", purposes: test, for: "the stateful stack" },
  { name: "etcd-client", provides: "/usr/bin/etcdctl", purposes: test, for: "the stateful stack" },
  { name: "qemu-system-x86", provides: "qemu-system-x86_64", purposes: test, for: "the VM" },
  { name: "mmdebstrap", provides: "mmdebstrap", purposes: test, for: "the VM image" },
  {
    name: "busybox-static",
    provides: "/bin/busybox",
    purposes: test,
    for: "the VM's initramfs, the node stack's image",
  },
  { name: "containerd", provides: "/usr/bin/containerd", purposes: test, for: "the node stack" },
  { name: "runc", provides: "/usr/sbin/runc", purposes: test, for: "the node stack" },
  { name: "cpio", provides: "cpio", purposes: test, for: "the VM's initramfs" },
  { name: "kmod", provides: "depmod", purposes: test, for: "the VM's kernel modules" },
  {
    name: "qemu-user-static",
    provides: "/usr/bin/qemu-aarch64-static",
    purposes: test,
    for: "running the aarch64 artifact",
  },
  {
    name: "libc6-arm64-cross",
    provides: "/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1",
    purposes: test,
    for: "running the aarch64 artifact",
  },
  {
    name: "libgcc-s1-arm64-cross",
    provides: "/usr/aarch64-linux-gnu/lib/libgcc_s.so.1",
    purposes: test,
    for: "running the aarch64 artifact",
  },
];

const searchPath = () =>
  (Deno.env.get("PATH") || "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    .split(":").concat(["/usr/sbin", "/sbin"]);

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/** Whether what `p` provides is on this machine. */
export function installed(p: Package): boolean {
  return p.provides.startsWith("/")
    ? isFile(p.provides)
    : searchPath().some((d) => d !== "" && isFile(`${d}/${p.provides}`));
}

/** The packages `purpose` needs that this machine lacks. */
export function missing(purpose: Purpose): Package[] {
  return packages.filter((p) => p.purposes.includes(purpose) && !installed(p));
}

/**
 * Why a test that needs `name` cannot run, or undefined when it is here:
 * the reason a skipped test prints, naming the package and what installs it.
 */
export function lacking(name: string): string | undefined {
  const p = packages.find((q) => q.name === name);
  if (!p) throw new Error(`scripts/packages.ts lists no package ${name}`);
  return installed(p)
    ? undefined
    : `${p.provides} is not installed (Debian package ${p.name}; \`deno task setup\` installs it)`;
}
