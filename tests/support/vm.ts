// A test node with its own kernel: qemu (TCG; KVM guests hang on these
// machines) boots the Debian image tests/support/vm/build.sh makes, with a
// second, read-only disk (/srv/payload) carrying the artifact under test and
// the test bundles. Commands run through the agent on the guest's second
// serial port (tests/support/vm/agent.py); the guest has no network.
//
// A power cut is SIGKILL of qemu's own process: the guest's page cache dies
// with it, and only what the guest wrote to its disk is in the image, which
// the next boot replays. That is the loss the systemd sandbox cannot show
// (it shares the machine's kernel and page cache).

import { join } from "node:path";
import { assertEquals } from "./assert.ts";
import { repoRoot } from "./sandbox.ts";
import { lacking } from "../../scripts/packages.ts";

const buildScript = new URL("./vm/build.sh", import.meta.url).pathname;

/** Why VM tests cannot run here, or undefined. */
export const vmUnavailable: string | undefined = (() => {
  if (Deno.uid() !== 0) return "the VM image build needs root (mmdebstrap --mode=root)";
  for (const pkg of ["qemu-system-x86", "mmdebstrap", "busybox-static", "cpio", "kmod"]) {
    const why = lacking(pkg);
    if (why) return why;
  }
  return undefined;
})();

/** Builds the image once (cached by content outside the repository) and returns its directory. */
export async function buildImage(): Promise<{ dir: string; builtMs: number }> {
  const t0 = performance.now();
  const o = await new Deno.Command("bash", {
    args: [buildScript],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  if (!o.success) throw new Error(`vm: build.sh exited ${o.code}`);
  // The directory is the last line (tools may print on stdout before it).
  const dir = new TextDecoder().decode(o.stdout).trim().split("\n").pop()!;
  return { dir, builtMs: performance.now() - t0 };
}

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** One node: its own disk image (a copy of the base), booted and cut as often as a test likes. */
export class Vm implements AsyncDisposable {
  #qemu: Deno.ChildProcess | undefined;
  #conn: Deno.Conn | undefined;
  #buf = "";
  #closed = false;
  #pumping: Promise<void> = Promise.resolve();
  #next = 1;
  /** Requests written so far, in turn: a partial write would cut a line another call then splices. */
  #writing: Promise<void> = Promise.resolve();
  readonly #dir: string;
  readonly #image: string;

  private constructor(readonly work: string, image: string) {
    this.#dir = image;
    this.#image = join(work, "node.img");
  }

  /**
   * A node from the base image with `payload` (a directory) as its read-only
   * second disk, not booted yet.
   */
  static async create(image: string, payload: string): Promise<Vm> {
    await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
    // One VM at a time on this machine, whichever checkout starts it: the
    // test runner runs two files at once, and two TCG guests on 2 cores
    // time each other out (seen in CI). The lock is beside the image cache.
    const cache = Deno.env.get("STRATUM_VM_CACHE") ?? "/var/cache/stratum-test-vm";
    await Deno.mkdir(cache, { recursive: true });
    const lock = await Deno.open(join(cache, "vm.lock"), {
      create: true,
      write: true,
    });
    await lock.lock(true);
    vmLocks.push(lock);
    const work = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "vm-" });
    const vm = new Vm(work, image);
    await run(["cp", "--sparse=always", join(image, "base.img"), vm.#image]);
    // Room for the payload (the node stack's bundle is ~270 MB) and ext4's own.
    const du = await new Deno.Command("du", { args: ["-sm", payload] }).output();
    const mib = Number(new TextDecoder().decode(du.stdout).split("\t")[0]) || 0;
    const size = Math.max(256, Math.ceil(mib * 1.25) + 64);
    await run(["mkfs.ext4", "-q", "-F", "-d", payload, join(work, "payload.img"), `${size}M`]);
    return vm;
  }

  /** Boots the node and returns once its agent answers (ms from power-on). */
  async boot(limitMs = 240_000): Promise<number> {
    // qemu connects to the agent's port on loopback (the tests may use
    // loopback, not unix sockets); this side listens first, so no race.
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (listener.addr as Deno.NetAddr).port;
    const t0 = performance.now();
    this.#qemu = new Deno.Command("qemu-system-x86_64", {
      args: [
        ...["-accel", "tcg,thread=multi", "-cpu", "max", "-m", "1536", "-smp", "2"],
        ...["-display", "none", "-no-reboot", "-nic", "none"],
        ...["-kernel", join(this.#dir, "vmlinuz"), "-initrd", join(this.#dir, "initrd.img")],
        ...["-append", "console=ttyS0 panic=-1 quiet"],
        "-drive",
        `file=${this.#image},format=raw,if=virtio,cache=writeback`,
        "-drive",
        `file=${join(this.work, "payload.img")},format=raw,if=virtio,readonly=on`,
        ...["-serial", `file:${join(this.work, "console.log")}`],
        ...["-chardev", `socket,id=agent,host=127.0.0.1,port=${port}`],
        ...["-device", "isa-serial,chardev=agent"],
      ],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const conn = await Promise.race([
      listener.accept(),
      new Promise<undefined>((r) => timer = setTimeout(() => r(undefined), 30_000)),
    ]);
    clearTimeout(timer);
    listener.close();
    if (!conn) throw new Error("vm: qemu did not connect to the agent's port");
    this.#conn = conn;
    this.#buf = "";
    this.#closed = false;
    this.#pumping = this.#pump(this.#conn);
    // The agent's first words may be lost before this connection: ask until
    // it answers. Then wait for the payload disk: it is mounted `nofail`, so
    // the boot does not wait for it and under emulation the agent can answer
    // first (a test's first command then found no /srv/payload/stratum).
    const ready = ["sh", "-c", "grep -q ' /srv/payload ' /proc/mounts"];
    for (let agent = false;;) {
      const r = await this.exec(agent ? ready : ["true"], { timeoutMs: 3000 })
        .catch(() => undefined);
      if (r?.code === 0 && agent) return performance.now() - t0;
      if (r?.code === 0) agent = true;
      else if (agent) await new Promise((res) => setTimeout(res, 100));
      if (performance.now() - t0 > limitMs) {
        throw new Error(
          `vm: ${agent ? "no /srv/payload" : "no agent"} after ${limitMs} ms: ${await this
            .console()}`,
        );
      }
    }
  }

  /** Runs argv in the guest as root. */
  async exec(
    argv: string[],
    opts: { env?: Record<string, string>; timeoutMs?: number } = {},
  ): Promise<ExecResult> {
    const id = this.#next++;
    const timeoutMs = opts.timeoutMs ?? 600_000;
    const req = { id, argv, env: opts.env ?? {}, timeout: Math.ceil(timeoutMs / 1000) };
    // Whole and in turn: Conn.write may write part of a line (the serial
    // port's buffer is small), and the agent skips a line it cannot parse:
    // the call would wait for its deadline. A likely cause, not proven, of
    // the one call the downtime bench saw go unanswered for 10 min.
    const line = new TextEncoder().encode(JSON.stringify(req) + "\n");
    const conn = this.#conn!;
    const written = this.#writing.then(async () => {
      for (let at = 0; at < line.length;) at += await conn.write(line.subarray(at));
    });
    this.#writing = written.catch(() => {});
    await written;
    const deadline = performance.now() + timeoutMs + 5000;
    for (;;) {
      let nl: number;
      while ((nl = this.#buf.indexOf("\n")) >= 0) {
        const line = this.#buf.slice(0, nl);
        this.#buf = this.#buf.slice(nl + 1);
        try {
          const d = JSON.parse(line);
          if (d.id === id) return { code: d.code, stdout: b64(d.out), stderr: b64(d.err) };
        } catch { /* noise on the line */ }
      }
      if (this.#closed) throw new Error("vm: the agent's connection closed");
      if (performance.now() > deadline) throw new Error(`vm: no answer to ${argv.join(" ")}`);
      await sleep(20);
    }
  }

  /** Reads the agent's connection into the buffer until it closes (one reader for all calls). */
  async #pump(conn: Deno.Conn): Promise<void> {
    const dec = new TextDecoder();
    const chunk = new Uint8Array(65536);
    try {
      for (;;) {
        const n = await conn.read(chunk);
        if (n === null) break;
        this.#buf += dec.decode(chunk.subarray(0, n), { stream: true });
      }
    } catch { /* closed by a power cut */ }
    this.#closed = true;
  }

  /** Runs a shell script in the guest; throws on a non-zero exit. */
  async sh(script: string): Promise<string> {
    const r = await this.exec(["sh", "-c", script]);
    if (r.code !== 0) throw new Error(`vm: ${script}: exit ${r.code}: ${r.stderr}`);
    return r.stdout;
  }

  /** A clean shutdown (`systemctl poweroff`): every unit stops, the disk is synced; qemu exits. */
  async shutdown(): Promise<void> {
    if (!this.#qemu) return;
    await this.exec(["systemctl", "--no-block", "poweroff"]);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const done = await Promise.race([
      this.#qemu.status.then(() => true),
      new Promise<boolean>((r) => timer = setTimeout(() => r(false), 120_000)),
    ]);
    clearTimeout(timer);
    if (!done) throw new Error("vm: the guest did not power off within 120 s");
    await this.powerCut(); // qemu has exited: this only tidies up
  }

  /** The power goes out: SIGKILL of qemu itself; whatever the guest had not written is gone. */
  async powerCut(): Promise<void> {
    if (!this.#qemu) return;
    try {
      Deno.kill(this.#qemu.pid, "SIGKILL");
    } catch { /* gone */ }
    await this.#qemu.status;
    await this.#qemu.stderr.cancel().catch(() => {});
    this.#qemu = undefined;
    try {
      this.#conn?.close();
    } catch { /* closed */ }
    this.#conn = undefined;
    await this.#pumping;
  }

  /** The guest's console so far (for messages). */
  async console(): Promise<string> {
    const text = await Deno.readTextFile(join(this.work, "console.log")).catch(() => "");
    return text.slice(-3000);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.powerCut();
    await Deno.remove(this.work, { recursive: true }).catch(() => {});
    vmLocks.shift()?.close();
  }
}

/** The lock each live Vm holds (closing the file releases it). */
const vmLocks: Deno.FsFile[] = [];

/**
 * A node, not booted, whose payload disk holds the artifact under test as
 * /srv/payload/stratum and what `fill` writes into the payload directory.
 */
export async function vmWithArtifact(
  image: string,
  artifact: string,
  fill: (payload: string) => Promise<void>,
): Promise<Vm> {
  await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
  const payload = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "payload-" });
  try {
    await Deno.copyFile(artifact, join(payload, "stratum"));
    await Deno.chmod(join(payload, "stratum"), 0o755);
    await fill(payload);
    return await Vm.create(image, payload);
  } finally {
    await Deno.remove(payload, { recursive: true });
  }
}

async function run(argv: string[]): Promise<void> {
  const o = await new Deno.Command(argv[0]!, { args: argv.slice(1), stderr: "piped" }).output();
  if (!o.success) {
    throw new Error(`${argv.join(" ")}: exit ${o.code}: ${new TextDecoder().decode(o.stderr)}`);
  }
}

function b64(s: string): string {
  return new TextDecoder().decode(Uint8Array.from(atob(s), (c) => c.charCodeAt(0)));
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * What a boot needed from the disk after a power cut, as the VM suites
 * check it: the installed bundle verifies for `mode`, and the running
 * slot's files match its manifest.
 */
export async function assertOnDisk(
  vm: Vm,
  mode: "host" | "nspawn",
  label: string,
): Promise<void> {
  const verify = await vm.exec([
    "/srv/payload/stratum",
    "bundle",
    "verify",
    "/var/lib/stratum/bundles",
    "--mode",
    mode,
  ]);
  assertEquals(verify.code, 0, `${label}: the installed bundle verifies: ${verify.stdout}`);
  const slot = JSON.parse(await vm.sh("cat /etc/stratum/node.json")).slot;
  const sums = await vm.exec([
    "sh",
    "-c",
    `cd /var/lib/stratum/slots/${slot} && sha256sum -c --quiet SHA256SUMS`,
  ]);
  assertEquals(sums.code, 0, `${label}: the slot matches its manifest: ${sums.stdout}`);
}
