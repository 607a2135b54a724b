// deno-lint-ignore-file no-console
// The one file operators copy onto air-gapped nodes (scripts/compile), run as
// they run it. Invariants: it runs with an empty environment (no HOME, no
// DENO_DIR, no network) and downloads nothing; --version names deno.json's
// version and the commit it was built from; concurrent first runs unpack
// once and leave no partial cache; the units it writes run it by its own
// path. Runs when STRATUM_BIN names the artifact (CI builds it).

import { join } from "node:path";
import * as rollout from "../lib/rollout/mod.ts";
import { assert, assertEquals } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { nspawnUnavailable, repoRoot } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { stratumBin, stratumCache } from "./support/stratum_bin.ts";

const why = stratumBin ? undefined : "STRATUM_BIN is not set (CI builds the artifact and sets it)";
if (why) console.error(`artifact tests are skipped: ${why}`);
const aarch64 = Deno.env.get("STRATUM_BIN_AARCH64");

/** Runs the artifact with nothing but `env` in its environment and no network. */
async function bare(args: string[], env: Record<string, string>, bin = stratumBin!) {
  const o = await new Deno.Command("unshare", {
    args: [
      "--net",
      "--",
      "env",
      "-i",
      ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
      bin,
      ...args,
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: o.code, stdout: dec.decode(o.stdout), stderr: dec.decode(o.stderr) };
}

async function git(...args: string[]): Promise<string> {
  const o = await new Deno.Command("git", { args, cwd: repoRoot, stdout: "piped" }).output();
  return new TextDecoder().decode(o.stdout).trim();
}

Deno.test({
  name: "with an empty environment and no network: --version, rollout commands, migrate plan",
  ignore: why !== undefined || Deno.uid() !== 0,
  async fn() {
    const cache = await Deno.makeTempDir({ prefix: "stratum-cache-" });
    const v = await bare(["--version"], { STRATUM_CACHE: cache });
    assertEquals(v.code, 0, v.stderr);
    const { version } = JSON.parse(await Deno.readTextFile(join(repoRoot, "deno.json")));
    const commit = await git("rev-parse", "--short=12", "HEAD");
    assert(
      v.stdout.startsWith(`stratum ${version} (commit ${commit}`),
      `${v.stdout} (want ${version}, ${commit})`,
    );
    const c = await bare(["rollout", "commands"], { STRATUM_CACHE: cache });
    assertEquals(c.stdout.trim().split("\n"), rollout.restartCommands());
    const root = await Deno.makeTempDir({ prefix: "stratum-root-" });
    await Deno.mkdir(join(root, "etc/stratum"), { recursive: true });
    await Deno.writeTextFile(
      join(root, "etc/stratum/node.json"),
      JSON.stringify({ mode: "host", slot: "a", node: "n1", updatedAt: "" }),
    );
    const b = await makeBundle(await Deno.makeTempDir());
    const p = await bare(
      ["migrate", "plan", "--to", "nspawn", "--bundle", b, "--root", root, "--json"],
      { STRATUM_CACHE: cache },
    );
    assertEquals(p.code, 0, p.stderr);
    assertEquals(JSON.parse(p.stdout).outcome, "planned");
    // Nothing else was written: the cache holds one unpacked copy, nothing partial.
    const entries = [...Deno.readDirSync(cache)].map((e) => e.name);
    assertEquals(entries.length, 1, entries.join(" "));
  },
});

Deno.test({
  name: "concurrent first runs unpack once and leave no partial copy",
  ignore: why !== undefined,
  async fn() {
    const cache = await Deno.makeTempDir({ prefix: "stratum-cache-" });
    const runs = await Promise.all(
      [0, 1, 2, 3, 4, 5].map(() =>
        new Deno.Command(stratumBin!, {
          args: ["--version"],
          env: { STRATUM_CACHE: cache },
          stdout: "piped",
          stderr: "piped",
        }).output()
      ),
    );
    for (const r of runs) assertEquals(r.code, 0, new TextDecoder().decode(r.stderr));
    const entries = [...Deno.readDirSync(cache)].map((e) => e.name);
    assertEquals(entries.length, 1, `one unpacked copy, no .unpack-* left: ${entries}`);
    assert(/^[0-9a-f]{16}$/.test(entries[0]!), entries[0]);
  },
});

Deno.test({
  name:
    "an installed node's boot unit runs the artifact by its own path; a full migration with env -i",
  ignore: why !== undefined || nspawnUnavailable !== undefined,
  async fn() {
    await using n = await Node.boot("host");
    const unit = await n.sb.exec(["cat", "/etc/systemd/system/stratum-boot.service"]);
    // Root runs a root-owned copy at boot, never the path the artifact was started from.
    assert(unit.stdout.includes("ExecStart=/var/lib/stratum/bin/stratum node boot"), unit.stdout);
    assert(!unit.stdout.includes("deno"), "the unit runs deno or a cache path");
    const copy = await n.sb.sh(
      `stat -c '%U %a' /var/lib/stratum/bin/stratum /var/lib/stratum/bin; cmp /var/lib/stratum/bin/stratum ${stratumBin} && echo same`,
    );
    assertEquals(copy.trim().split("\n"), ["root 755", "root 755", "same"]);
    const r = await n.sb.exec([
      "env",
      "-i",
      `STRATUM_CACHE=${stratumCache()}`,
      stratumBin!,
      "migrate",
      "run",
      "--to",
      "nspawn",
      "--bundle",
      n.bundle,
      "--json",
    ]); // deno-fmt-ignore
    assertEquals(r.code, 0, r.stderr);
    assertEquals(await n.assertInvariant("after a migration run with env -i"), "complete");
  },
});

Deno.test({
  name:
    "a cache a power cut left with empty or short files is unpacked again, never run; a damaged file exits 1",
  ignore: why !== undefined || Deno.uid() !== 0,
  async fn() {
    // A real power cut during or right after the first unpack left deno,
    // the JavaScript and BUILD at 0 bytes, and every command exited 0 doing
    // nothing. Each damaged cache here must still run the real command.
    const cache = await Deno.makeTempDir({ prefix: "stratum-cache-" });
    const good = await bare(["--version"], { STRATUM_CACHE: cache });
    assertEquals(good.code, 0, good.stderr);
    const [dir] = [...Deno.readDirSync(cache)].filter((e) => !e.name.startsWith("."));
    const unpacked = join(cache, dir!.name);
    // The JavaScript is split per command: a chunk --version never loads
    // must be whole too, or a later command would fail on it.
    const chunk = [...Deno.readDirSync(join(unpacked, "js"))].map((e) => e.name)
      .find((n) => n.startsWith("chunk-"));
    assert(chunk, "the payload has chunks");
    for (
      const [what, damage] of [
        ["deno emptied", () => Deno.truncate(join(unpacked, "deno"), 0)],
        ["js/main.js emptied", () => Deno.truncate(join(unpacked, "js/main.js"), 0)],
        [`js/${chunk} cut short`, () => Deno.truncate(join(unpacked, "js", chunk), 100)],
      ] as const
    ) {
      await damage();
      const r = await bare(["--version"], { STRATUM_CACHE: cache });
      assertEquals([r.code, r.stdout], [0, good.stdout], `${what}: ${r.stderr}`);
      assert(r.stderr.includes("unpacking it again"), `${what}: says so: ${r.stderr}`);
    }
    // A damaged artifact (one byte of its payload changed) refuses to run.
    const copy = join(cache, "stratum-damaged");
    const bytes = await Deno.readFile(stratumBin!);
    bytes[bytes.length - 5000] = bytes[bytes.length - 5000]! ^ 0xff;
    await Deno.writeFile(copy, bytes, { mode: 0o755 });
    await Deno.remove(unpacked, { recursive: true });
    const o = await new Deno.Command("env", {
      args: ["-i", `STRATUM_CACHE=${cache}`, copy, "--version"],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(o.stderr);
    assert(o.code !== 0, `a damaged artifact must not exit 0: ${err}`);
    assertEquals(new TextDecoder().decode(o.stdout), "");
    await Deno.remove(cache, { recursive: true });
  },
});

Deno.test({
  name:
    "a cache another user owns or can write, or that is a link, is refused before anything runs from it",
  ignore: why !== undefined || Deno.uid() !== 0,
  async fn() {
    const open = await Deno.makeTempDir({ prefix: "stratum-cache-" });
    await Deno.chmod(open, 0o777);
    const theirs = await Deno.makeTempDir({ prefix: "stratum-cache-" });
    await Deno.chown(theirs, 65534, 65534);
    const linked = `${await Deno.makeTempDir({ prefix: "stratum-cache-" })}.link`;
    await Deno.symlink(theirs, linked);
    for (
      const [what, cache, words] of [
        ["writable by others", open, "writable by others"],
        ["owned by nobody", theirs, "not owned by uid 0"],
        ["a symlink", linked, "is a symlink"],
      ] as const
    ) {
      const r = await bare(["--version"], { STRATUM_CACHE: cache });
      assertEquals([r.code, r.stdout], [1, ""], `${what}: ${r.stderr}`);
      assert(r.stderr.includes(words), `${what}: ${r.stderr}`);
      assertEquals([...Deno.readDirSync(cache)], [], `${what}: nothing was unpacked there`);
    }
  },
});

/** qemu-user-static and the arm64 libraries that run the aarch64 deno here, or why not. */
const emulator = await (async () => {
  const qemu = "/usr/bin/qemu-aarch64-static";
  const sysroot = "/usr/aarch64-linux-gnu";
  const ok = await Promise.all(
    [qemu, `${sysroot}/lib/ld-linux-aarch64.so.1`].map((p) =>
      Deno.stat(p).then(() => true, () => false)
    ),
  );
  return ok.every(Boolean) ? { qemu, sysroot } : undefined;
})();
if (aarch64 && !emulator) {
  console.error(
    "the aarch64 artifact is not run: qemu-user-static, libc6-arm64-cross or libgcc-s1-arm64-cross is missing",
  );
}

Deno.test({
  name:
    "the aarch64 artifact runs under qemu-user: --version, rollout commands, migrate plan on a scratch root",
  ignore: aarch64 === undefined || emulator === undefined || Deno.uid() !== 0,
  async fn() {
    // No binfmt_misc entry here: the artifact's own stub runs, unpacking and
    // checking its payload, with one change made here and not shipped: its
    // exec of deno goes through qemu-aarch64-static. Same line count, so the
    // payload offset holds.
    const text = await Deno.readFile(aarch64!);
    const stubEnd = text.indexOf(0x1f); // the gzip payload's first byte
    const stub = new TextDecoder().decode(text.subarray(0, stubEnd));
    const exec = '  exec "$dir/deno" run';
    assert(stub.includes(exec), "the stub execs deno");
    const emulated = stub.replace(
      exec,
      `  exec ${emulator!.qemu} -L ${emulator!.sysroot} "$dir/deno" run`,
    );
    const work = await Deno.makeTempDir({ prefix: "stratum-arm64-" });
    try {
      const bin = join(work, "stratum");
      const body = new TextEncoder().encode(emulated);
      const file = new Uint8Array(body.length + text.length - stubEnd);
      file.set(body);
      file.set(text.subarray(stubEnd), body.length);
      await Deno.writeFile(bin, file, { mode: 0o755 });
      const env = { STRATUM_CACHE: join(work, "cache") };
      const v = await bare(["--version"], env, bin);
      assertEquals(v.code, 0, v.stderr);
      const { version } = JSON.parse(await Deno.readTextFile(join(repoRoot, "deno.json")));
      assert(v.stdout.startsWith(`stratum ${version} (commit `), v.stdout);
      const c = await bare(["rollout", "commands"], env, bin);
      assertEquals(c.stdout.trim().split("\n"), rollout.restartCommands(), c.stderr);
      const root = join(work, "root");
      await Deno.mkdir(join(root, "etc/stratum"), { recursive: true });
      await Deno.writeTextFile(
        join(root, "etc/stratum/node.json"),
        JSON.stringify({ mode: "host", slot: "a", node: "n1", updatedAt: "" }),
      );
      const b = await makeBundle(join(work, "bundle"));
      const p = await bare(
        ["migrate", "plan", "--to", "nspawn", "--bundle", b, "--root", root, "--json"],
        env,
        bin,
      );
      assertEquals(p.code, 0, p.stderr);
      assertEquals(JSON.parse(p.stdout).outcome, "planned");
    } finally {
      await Deno.remove(work, { recursive: true });
    }
  },
});

Deno.test({
  name: "the aarch64 artifact carries an aarch64 deno",
  ignore: aarch64 === undefined,
  async fn() {
    const text = await Deno.readFile(aarch64!);
    const head = new TextDecoder().decode(text.slice(0, 4096));
    const lines = Number(/tail -n \+(\d+)/.exec(head)?.[1]);
    assert(lines > 1, "no payload offset in the stub");
    const dir = await Deno.makeTempDir();
    const sh =
      `tail -n +${lines} "$1" | gzip -dc | tar -x -C "$2" ./deno && head -c 20 "$2/deno" | od -An -tx1`;
    const o = await new Deno.Command("sh", {
      args: ["-c", sh, "sh", aarch64!, dir],
      stdout: "piped",
    })
      .output();
    const bytes = new TextDecoder().decode(o.stdout).trim().split(/\s+/);
    assertEquals(bytes.slice(0, 4), ["7f", "45", "4c", "46"], "an ELF file");
    assertEquals(bytes[4], "02", "64-bit");
    // e_machine at offset 18, little endian: 0xb7 is EM_AARCH64.
    assertEquals([bytes[18], bytes[19]], ["b7", "00"]);
  },
});
