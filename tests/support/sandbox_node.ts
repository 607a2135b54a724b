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
import { type Behavior, makeBundle } from "./bundle.ts";
import { stratumArgv, stratumEnv } from "./stratum_bin.ts";
import { repoRoot, Sandbox } from "./sandbox.ts";

export type Mode = "host" | "nspawn";

/** Exits 0 once the test stack's health endpoint answers 200 (python3 is in every sandbox). */
const healthProbe =
  "import urllib.request,sys;urllib.request.urlopen('http://127.0.0.1:18080/healthz',timeout=1)";

/** A fresh test bundle under the checkout (the sandbox sees the checkout, not the host's /tmp). */
export async function bundle(behavior?: Partial<Record<Mode, Behavior>>): Promise<string> {
  await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
  const dir = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bundle-" });
  return await makeBundle(dir, behavior ? { behavior } : {});
}

export class Node implements AsyncDisposable {
  private constructor(
    public sb: Sandbox,
    readonly bundle: string,
    readonly from: Mode,
    readonly to: Mode,
    /** Where /etc and /var live across power cuts; undefined: in memory. */
    readonly stateDir: string | undefined,
  ) {}

  /**
   * A sandbox with a node installed in `from` mode, slot a. With
   * `persistent`, its /etc and /var are on disk, so {@linkcode powerCut} and
   * {@linkcode boot} can follow.
   */
  static async boot(
    from: Mode,
    behavior?: Partial<Record<Mode, Behavior>>,
    opts: { persistent?: boolean } = {},
  ): Promise<Node> {
    let state: string | undefined;
    if (opts.persistent) {
      await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
      state = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "state-" });
    }
    const sb = await Sandbox.start(state ? { state } : {});
    const b = await bundle(behavior);
    // Installed as an operator installs it: `stratum node install`.
    const r = await sb.exec(
      stratumArgv(["node", "install", "--mode", from, "--bundle", b, "--node", "node-1"]),
      { env: { NO_COLOR: "1", ...stratumEnv() }, cwd: repoRoot },
    );
    if (r.code !== 0) {
      await sb[Symbol.asyncDispose]();
      throw new Error(`install failed: ${r.stderr}`);
    }
    return new Node(sb, b, from, from === "host" ? "nspawn" : "host", state);
  }

  /**
   * A sandbox with nothing installed (a node's first boot), and a bundle for
   * it; `from` is the mode tests will install.
   */
  static async fresh(
    from: Mode,
    opts: { persistent?: boolean } = {},
  ): Promise<Node> {
    let state: string | undefined;
    if (opts.persistent) {
      await Deno.mkdir(join(repoRoot, ".test-tmp"), { recursive: true });
      state = await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "state-" });
    }
    const sb = await Sandbox.start(state ? { state } : {});
    return new Node(sb, await bundle(), from, from === "host" ? "nspawn" : "host", state);
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
      const r = await this.sb.exec(["python3", "-c", healthProbe]);
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

  /** The node's state as tests/support/sandbox/inspect.ts reports it. */
  async state(): Promise<any> {
    const r = await this.sb.deno(["run", "-A", "tests/support/sandbox/inspect.ts"]);
    assertEquals(r.code, 0, r.stderr);
    return JSON.parse(r.stdout);
  }

  /** Checks the invariant; returns the journal's step. */
  async assertInvariant(label: string): Promise<string> {
    const s = await this.state();
    const step = s.journal?.step;
    if (step === "failed") return step;
    assertEquals(
      s.active.a !== s.active.b,
      true,
      `${label}: exactly one stack runs: ${JSON.stringify(s.active)}`,
    );
    if (step === "complete") {
      assertEquals(s.active, { a: false, b: true }, label);
      assertEquals(s.health, `200 ok ${this.to} node-1`, label);
      assertEquals([s.units.a, s.slots.a], [[], false], `${label}: the source is gone`);
      assertEquals([s.node.mode, s.node.slot], [this.to, "b"], label);
    } else if (step === "rolled-back") {
      assertEquals(s.active, { a: true, b: false }, label);
      assertEquals(s.health, `200 ok ${this.from} node-1`, label);
      assertEquals([s.units.b, s.slots.b], [[], false], `${label}: the target is gone`);
      assertEquals([s.node.mode, s.node.slot], [this.from, "a"], label);
    } else {
      throw new Error(`${label}: journal left at ${JSON.stringify(s.journal)}`);
    }
    return step;
  }

  async [Symbol.asyncDispose]() {
    await this.sb[Symbol.asyncDispose]();
    if (this.stateDir) await Deno.remove(this.stateDir, { recursive: true }).catch(() => {});
  }
}
