// One pass over the bundle (the floor of issue #29 §5: one read of the
// source, one write): `migrate run`, `node install` and `node upgrade` read
// the operator's bundle once, by the copy that hashes each file as it reads
// it; a file the node already holds byte for byte (another mode's installed
// copy, the release an upgrade replaces) is hashed there too, once, and
// linked instead of written (lib/bundle/_held.ts). Neither the staged copy nor the slot built from it
// (hard links to that copy) is read again by the same process, however many
// checks the run makes (preflight runs before the journal and again as the
// migration's first step; an upgrade checks before it compares digests).
// Counted as the kernel sees it: the bytes read from one bundle file, under
// strace, in the systemd sandbox.

import { join } from "node:path";
import { assertEquals } from "./support/assert.ts";
import { makeBundle } from "./support/bundle.ts";
import { nspawnUnavailable, repoRoot } from "./support/sandbox.ts";
import { Node } from "./support/sandbox_node.ts";
import { stratumArgv, stratumEnv } from "./support/stratum_bin.ts";
import { parseTrace } from "./support/syscall_trace.ts";
import { lacking } from "../scripts/packages.ts";

const straceMissing = lacking("strace");
const why = nspawnUnavailable ?? straceMissing;

/** The file counted: read by nothing but the bundle's hashing and copying. */
const file = "stack/stack.py";

/**
 * Runs `stratum ARGS` in the node under strace and returns how many times
 * each copy of `file` was read whole, by path: the bytes read from it (by
 * read, pread or the kernel's copy_file_range and sendfile) over its size.
 * An open to fsync a file reads nothing and does not count.
 */
async function passesOver(
  n: Node,
  bundle: string,
  args: string[],
): Promise<Map<string, number>> {
  const trace = join(repoRoot, ".test-tmp", `strace-reads-${Deno.pid}.txt`);
  const calls = "read,pread64,readv,preadv,copy_file_range,sendfile,splice";
  const r = await n.sb.exec([
    ...["strace", "-f", "-y", "-qq", "-e", "signal=none", "-e", `trace=${calls}`],
    ...["-e", "read=none", "-s", "0", "-o", trace],
    ...stratumArgv(args),
  ], { cwd: repoRoot, env: { NO_COLOR: "1", ...stratumEnv() } });
  const text = await Deno.readTextFile(trace);
  await Deno.remove(trace);
  assertEquals(r.code, 0, `stratum ${args.join(" ")}: ${r.stderr}`);
  const bytes = new Map<string, number>();
  for (const c of parseTrace(text)) {
    // The file read from: the first fd, but sendfile's second (out, in).
    const fds = [...c.args.matchAll(/\d+<([^>]*)>/g)].map((m) => m[1]!);
    const from = c.name === "sendfile" ? fds[1] : fds[0];
    if (!from?.endsWith(`/${file}`)) continue;
    const got = Number(/=\s*(\d+)$/.exec(c.args)?.[1] ?? 0);
    bytes.set(from, (bytes.get(from) ?? 0) + got);
  }
  const size = (await Deno.stat(join(bundle, "host", file))).size;
  return new Map([...bytes].map(([p, b]) => [p, b / size]));
}

/** The release directories the node held before a command (`.MODE-VERSION` under bundles/). */
async function releases(n: Node): Promise<string[]> {
  const r = await n.sb.exec(["ls", "-A", "/var/lib/stratum/bundles"]);
  return r.stdout.split("\n").filter((d) => /^\.[a-z]+-/.test(d))
    .map((d) => `/var/lib/stratum/bundles/${d}/`);
}

/**
 * Passes over the operator's copy (under `bundle`), the releases the node
 * held before (`held`), stratum's new copy, and the slots.
 */
function split(passes: Map<string, number>, bundle: string, mode: string, held: string[] = []) {
  let source = 0;
  let before = 0;
  let staged = 0;
  let slots = 0;
  for (const [p, k] of passes) {
    if (p === join(bundle, mode, file)) source += k;
    else if (held.some((h) => p.startsWith(h))) before += k;
    else if (p.startsWith(`/var/lib/stratum/bundles/.${mode}`)) staged += k;
    else if (p.startsWith("/var/lib/stratum/slots/")) slots += k;
    else throw new Error(`${file} read at an unexpected path ${p}`);
  }
  return { source, held: before, staged, slots };
}

Deno.test({
  name: "node install reads the bundle once, and never reads its copy or the slot back",
  ignore: why !== undefined,
  async fn() {
    await using n = await Node.fresh("host");
    const passes = await passesOver(n, n.bundle, [
      ...["node", "install", "--mode", "host", "--bundle", n.bundle, "--node", "node-1"],
    ]);
    assertEquals(
      split(passes, n.bundle, "host"),
      { source: 1, held: 0, staged: 0, slots: 0 },
      [...passes].join(" "),
    );
  },
});

Deno.test({
  name:
    "migrate run reads the bundle once (and a file the node holds, once), never its new copy or the slot",
  ignore: why !== undefined,
  async fn() {
    await using n = await Node.boot("host");
    const held = await releases(n);
    const passes = await passesOver(n, n.bundle, [
      "migrate",
      "run",
      "--to",
      "nspawn",
      "--bundle",
      n.bundle,
    ]);
    // The test bundle's file is the same in both modes: the host copy is
    // hashed and linked, the operator's hashed and not written.
    assertEquals(
      split(passes, n.bundle, "nspawn", held),
      { source: 1, held: 1, staged: 0, slots: 0 },
      [...passes].join(" "),
    );
  },
});

Deno.test({
  name:
    "node upgrade reads the new bundle once (and a file the release holds, once), never its staged copy or the slot",
  ignore: why !== undefined,
  async fn() {
    await using n = await Node.boot("host");
    const v2 = await makeBundle(
      await Deno.makeTempDir({ dir: join(repoRoot, ".test-tmp"), prefix: "bundle-v2-" }),
      { release: "2" },
    );
    try {
      const held = await releases(n);
      const passes = await passesOver(n, v2, ["node", "upgrade", "--bundle", v2]);
      // The upgrade's target slot is built from the staged copy (promoted
      // only once the target is proven), by links: no read. The file is the
      // same in both releases: the running one's copy is hashed and linked.
      assertEquals(
        split(passes, v2, "host", held),
        { source: 1, held: 1, staged: 0, slots: 0 },
        [
          ...passes,
        ].join(" "),
      );
    } finally {
      await Deno.remove(v2, { recursive: true });
    }
  },
});
