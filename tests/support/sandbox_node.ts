// deno-lint-ignore-file no-explicit-any
// A node in the systemd sandbox for end-to-end tests: a sandbox with a node
// stack installed from a test bundle, the real CLI run inside it, its state
// read back, THE invariant, and, for the reboot tests, a power cut and a
// boot of the same node as a node boots (multi-user.target).
//
// THE invariant: exactly one slot's stack runs and answers its health
// check, and either the journal says complete (the target runs, the
// source's units and slot are gone, node.json names the target) or
// rolled-back (the source runs, the target's units and slot are gone,
// node.json names the source) — or it says failed.

import { join } from "node:path";
import { assertEquals } from "./assert.ts";
import {
  type Behavior,
  etcdUrl,
  makeBundle,
  makeEtcdBundle,
  makeVolumeBundle,
  volumeUrl,
} from "./bundle.ts";
import { stratumArgv, stratumEnv } from "./stratum_bin.ts";
import { repoRoot, Sandbox } from "./sandbox.ts";

export type Mode = "host" | "nspawn";

/** Which stack a test node runs: the small test stack, or Debian's etcd (the stateful one). */
export type StackKind = "test" | "etcd" | "volume";

/** The health URL of each stack. */
export const healthUrls: Record<StackKind, string> = {
  test: "http://127.0.0.1:18080/healthz",
  etcd: `${etcdUrl}/health`,
  volume: volumeUrl,
};

/** Exits 0 once a stack's health endpoint answers 200 (python3 is in every sandbox). */
const healthProbe = (url: string) =>
  `import urllib.request,sys;urllib.request.urlopen('${url}',timeout=1)`;

/** Bundles made here, removed when the test run ends (a node removes its own sooner). */
const made: string[] = [];
globalThis.addEventListener("unload", () => {
  for (const d of made) {
    try {
      Deno.removeSync(d, { recursive: true });
    } catch { /* removed already */ }
  }
});

/** A fresh test bundle under the checkout (the sandbox sees the checkout, not the host's /tmp). */
export async function bundle(
  behavior?: Partial<Record<Mode, Behavior>>,
  stack: StackKind = "test",
  sysctl?: Partial<Record<Mode, string>>,
): Promise<string> {
  await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
  const dir = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bundle-" });
  made.push(dir);
  if (stack === "etcd") return await makeEtcdBundle(dir);
  if (stack === "volume") return await makeVolumeBundle(dir);
  return await makeBundle(dir, {
    ...(behavior ? { behavior } : {}),
    ...(sysctl ? { sysctl } : {}),
  });
}

export class Node implements AsyncDisposable {
  private constructor(
    public sb: Sandbox,
    readonly bundle: string,
    readonly from: Mode,
    readonly to: Mode,
    /** Where /etc and /var live across power cuts; undefined: in memory. */
    readonly stateDir: string | undefined,
    readonly stack: StackKind = "test",
  ) {}

  /**
   * A sandbox with a node installed in `from` mode, slot a. With
   * `persistent`, its /etc and /var are on disk, so {@linkcode powerCut} and
   * {@linkcode boot} can follow.
   */
  static async boot(
    from: Mode,
    behavior?: Partial<Record<Mode, Behavior>>,
    opts: {
      persistent?: boolean;
      stack?: StackKind;
      sysctl?: Partial<Record<Mode, string>>;
      /** A bundle the test made (under the checkout): used instead of a new one. */
      bundleDir?: string;
    } = {},
  ): Promise<Node> {
    let state: string | undefined;
    if (opts.persistent) {
      await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
      state = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "state-" });
    }
    const sb = await Sandbox.start(state ? { state } : {});
    const b = opts.bundleDir ?? await bundle(behavior, opts.stack, opts.sysctl);
    // Installed as an operator installs it: `stratum node install`.
    const r = await sb.exec(
      stratumArgv(["node", "install", "--mode", from, "--bundle", b, "--node", "node-1"]),
      { env: { NO_COLOR: "1", ...stratumEnv() }, cwd: repoRoot },
    );
    if (r.code !== 0) {
      await sb[Symbol.asyncDispose]();
      await Deno.remove(b, { recursive: true }).catch(() => {});
      if (state) await Deno.remove(state, { recursive: true }).catch(() => {});
      throw new Error(`install failed: ${r.stderr}`);
    }
    return new Node(sb, b, from, from === "host" ? "nspawn" : "host", state, opts.stack);
  }

  /**
   * A sandbox with nothing installed (a node's first boot), and a bundle for
   * it; `from` is the mode tests will install.
   */
  static async fresh(
    from: Mode,
    opts: { persistent?: boolean; stack?: StackKind } = {},
  ): Promise<Node> {
    let state: string | undefined;
    if (opts.persistent) {
      await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
      state = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "state-" });
    }
    const sb = await Sandbox.start(state ? { state } : {});
    const b = await bundle(undefined, opts.stack);
    return new Node(sb, b, from, from === "host" ? "nspawn" : "host", state, opts.stack);
  }

  /** Every process dies at once; /etc and /var stay as they were on disk. */
  async powerCut(): Promise<void> {
    await this.sb.powerCut();
  }

  /**
   * Boots the node again as a node boots (multi-user.target, so
   * stratum-boot.service runs) and waits until its health endpoint answers.
   * Returns the milliseconds from power-on to systemd's boot done and to
   * healthy (undefined when it never answered within the limit).
   */
  async boot(limitMs = 60_000): Promise<{ bootedMs: number; healthyMs: number | undefined }> {
    if (!this.stateDir) throw new Error("boot() needs a node made with { persistent: true }");
    const t0 = performance.now();
    this.sb = await Sandbox.start({ state: this.stateDir, unit: "multi-user.target" });
    const bootedMs = performance.now() - t0;
    for (;;) {
      const r = await this.sb.exec(["python3", "-c", healthProbe(healthUrls[this.stack])]);
      if (r.code === 0) return { bootedMs, healthyMs: performance.now() - t0 };
      if (performance.now() - t0 > limitMs) return { bootedMs, healthyMs: undefined };
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async stratum(args: string[], env: Record<string, string> = {}) {
    const r = await this.sb.exec(stratumArgv(args), {
      env: { NO_COLOR: "1", ...stratumEnv(), ...env },
      cwd: repoRoot,
    });
    let doc: any = undefined;
    try {
      doc = JSON.parse(r.stdout);
    } catch { /* not --json */ }
    return { ...r, doc };
  }

  /**
   * Runs the shell command `cmd` inside slot `slot`'s nspawn machine (as
   * docs/nspawn.md says an operator does: nsenter into its systemd, the
   * child of the unit's main process).
   */
  async inMachine(slot: "a" | "b", cmd: string): Promise<string> {
    return await this.sb.sh(
      `pid=$(systemctl show -P MainPID stratum-${slot}-machine.service); ` +
        `nsenter -t $(cat /proc/$pid/task/$pid/children) -m -p /bin/sh -c ${
          JSON.stringify(cmd).replaceAll("$", "\\$")
        }`,
    );
  }

  /** The node's state as tests/support/sandbox/inspect.ts reports it. */
  async state(): Promise<any> {
    const r = await this.sb.deno(["run", "-A", "tests/support/sandbox/inspect.ts"], {
      HEALTH_URL: healthUrls[this.stack],
    });
    assertEquals(r.code, 0, r.stderr);
    return JSON.parse(r.stdout);
  }

  /** Checks the invariant; returns the journal's step. */
  async assertInvariant(label: string): Promise<string> {
    let s = await this.state();
    // etcd's /health does a quorum read and can answer false for a moment
    // under load although the member runs; the test stack answers at once.
    for (let i = 0; this.stack === "etcd" && i < 40 && !s.health.startsWith("200 "); i++) {
      await new Promise((r) => setTimeout(r, 250));
      s = await this.state();
    }
    const step = s.journal?.step;
    if (step === "failed") return step;
    assertEquals(
      s.active.a !== s.active.b,
      true,
      `${label}: exactly one stack runs: ${JSON.stringify(s.active)}`,
    );
    if (step === "complete") {
      assertEquals(s.active, { a: false, b: true }, label);
      assertEquals(s.health, this.#healthy(this.to), label);
      assertEquals([s.units.a, s.slots.a], [[], false], `${label}: the source is gone`);
      assertEquals([s.node.mode, s.node.slot], [this.to, "b"], label);
    } else if (step === "rolled-back") {
      assertEquals(s.active, { a: true, b: false }, label);
      assertEquals(s.health, this.#healthy(this.from), label);
      assertEquals([s.units.b, s.slots.b], [[], false], `${label}: the target is gone`);
      assertEquals([s.node.mode, s.node.slot], [this.from, "a"], label);
    } else {
      throw new Error(`${label}: journal left at ${JSON.stringify(s.journal)}`);
    }
    return step;
  }

  /** What inspect.ts reads from a healthy stack's endpoint (etcd's does not name the mode). */
  #healthy(mode: Mode): string {
    if (this.stack === "volume") return "200 sees secret for node-1";
    return this.stack === "etcd" ? '200 {"health":"true"}' : `200 ok ${mode} node-1`;
  }

  async [Symbol.asyncDispose]() {
    await this.sb[Symbol.asyncDispose]();
    if (this.stateDir) await Deno.remove(this.stateDir, { recursive: true }).catch(() => {});
    await Deno.remove(this.bundle, { recursive: true }).catch(() => {});
  }
}
