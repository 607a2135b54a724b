// lib/host/durable_file.ts, syscall by syscall where it matters (strace) and
// by its effects elsewhere. Invariants (docs/durability.md): what a tree
// holds is fsynced, file and directory; a new directory is fsynced into its
// parent; a removal is followed by an fsync of the parent; a durable write
// has exactly the mode asked for, leaves no temp file when it fails, and no
// file descriptor open.

import $ from "dax";
import { dirname, join } from "node:path";
import {
  ensureDir,
  removeStaleTemps,
  syncTree,
  writeFileDurable,
} from "../lib/host/durable_file.ts";
import { assert, assertEquals, assertRejects } from "./support/assert.ts";
import { parseTrace } from "./support/syscall_trace.ts";
import { lacking } from "../scripts/packages.ts";

const ops = new URL("./support/tree_ops.ts", import.meta.url).pathname;

const noStrace = lacking("strace");

/** The calls `op DIR` makes, traced. */
async function traced(op: string, dir: string) {
  const trace = `${await Deno.makeTempFile()}.trace`;
  await $`strace -f -y -qq -e signal=none -o ${trace} -e trace=fsync,fdatasync,mkdir,mkdirat,unlinkat,rmdir,rename,renameat,renameat2,symlinkat ${Deno.execPath()} run -A ${ops} ${op} ${dir}`
    .quiet();
  const calls = parseTrace(await Deno.readTextFile(trace));
  await Deno.remove(trace);
  return calls;
}

async function tree(): Promise<{ root: string; files: string[]; dirs: string[] }> {
  const root = await Deno.makeTempDir({ prefix: "stratum-tree-" });
  // More files than syncTree syncs at once (8), so every batch boundary is crossed.
  const names = ["a.txt", "sub/b.txt", "sub/deeper/c.txt"];
  for (let i = 0; i < 20; i++) names.push(`many/f${i}.txt`);
  const files = names.map((f) => join(root, f));
  for (const f of files) {
    await Deno.mkdir(dirname(f), { recursive: true });
    await Deno.writeTextFile(f, f);
  }
  await Deno.symlink("a.txt", join(root, "link"));
  return {
    root,
    files,
    dirs: [root, join(root, "sub"), join(root, "sub/deeper"), join(root, "many")],
  };
}

Deno.test({
  name: "syncTree fsyncs every file and directory; dirsOnly, only the directories",
  ignore: noStrace !== undefined,
  async fn() {
    const t = await tree();
    const synced = (await traced("sync-tree", t.root)).filter((c) => c.name === "fsync")
      .map((c) => c.fdPath);
    for (const p of [...t.files, ...t.dirs]) assert(synced.includes(p), `${p} was not fsynced`);
    const dirsOnly = (await traced("sync-dirs", t.root)).filter((c) => c.name === "fsync")
      .map((c) => c.fdPath);
    for (const d of t.dirs) assert(dirsOnly.includes(d), `${d} was not fsynced`);
    for (const f of t.files) assert(!dirsOnly.includes(f), `${f} fsynced with dirsOnly`);
  },
});

Deno.test({
  name: "ensureDir fsyncs each parent after making a directory in it",
  ignore: noStrace !== undefined,
  async fn() {
    const root = await Deno.makeTempDir({ prefix: "stratum-tree-" });
    const calls = await traced("ensure-dir", join(root, "x/y"));
    const seq = calls.filter((c) => c.name.startsWith("mkdir") || c.name === "fsync").map((c) =>
      c.name === "fsync" ? `fsync ${c.fdPath}` : `mkdir ${/"([^"]+)"/.exec(c.args)?.[1]}`
    );
    const i = seq.indexOf(`mkdir ${join(root, "x")}`);
    const j = seq.indexOf(`mkdir ${join(root, "x/y")}`);
    assert(i >= 0 && j > i, seq.join("\n"));
    assert(seq.slice(i + 1, j).includes(`fsync ${root}`), seq.join("\n"));
    assert(seq.slice(j + 1).includes(`fsync ${join(root, "x")}`), seq.join("\n"));
  },
});

Deno.test({
  name: "removeTreeDurable fsyncs the parent after the removal",
  ignore: noStrace !== undefined,
  async fn() {
    const t = await tree();
    const calls = await traced("remove-tree", t.root);
    const lastRemoval = calls.findLastIndex((c) => c.name === "unlinkat" || c.name === "rmdir");
    assert(lastRemoval >= 0);
    assert(
      calls.slice(lastRemoval + 1).some((c) => c.name === "fsync" && c.fdPath === dirname(t.root)),
      "no fsync of the parent after the removal",
    );
    await assertRejects(() => Deno.stat(t.root));
  },
});

Deno.test({
  name:
    "symlinkDurable fsyncs the directory after the link lands, and again when the link was already there",
  ignore: noStrace !== undefined,
  async fn() {
    // A unit's .wants/ link that is only in the page cache is gone after a
    // power cut, and the unit with it (found by a real power cut in a VM).
    const dir = await Deno.realPath(await Deno.makeTempDir({ prefix: "stratum-wants-" }));
    const link = join(dir, "unit.service");
    for (const round of ["made", "already there"]) {
      const calls = await traced("symlink", link);
      const landed = round === "made"
        ? calls.findLastIndex((c) => c.name.startsWith("rename") && c.args.includes(link))
        : 0;
      assert(landed >= 0, `${round}: no rename onto ${link}`);
      assert(
        calls.slice(landed).some((c) => c.name === "fsync" && c.fdPath === dir),
        `${round}: no fsync of ${dir} after the link`,
      );
      assertEquals(await Deno.readLink(link), "../target.service");
    }
    assertEquals(
      [...Deno.readDirSync(dir)].map((e) => e.name),
      ["unit.service"],
      "no temp link left",
    );
    await Deno.remove(dir, { recursive: true });
  },
});

Deno.test("writeFileDurable sets exactly the mode asked for, whatever the umask", async () => {
  const dir = await Deno.makeTempDir();
  const old = Deno.umask(0o077);
  try {
    await writeFileDurable(join(dir, "f"), "x", { mode: 0o644 });
    assertEquals((await Deno.stat(join(dir, "f"))).mode! & 0o777, 0o644);
    await writeFileDurable(join(dir, "g"), "x");
    assertEquals((await Deno.stat(join(dir, "g"))).mode! & 0o777, 0o600);
  } finally {
    Deno.umask(old);
  }
});

Deno.test("a durable write that fails leaves no temp file and the target as it was", async () => {
  const dir = await Deno.makeTempDir();
  await Deno.mkdir(join(dir, "target"));
  await Deno.writeTextFile(join(dir, "target/keep"), "x");
  // Renaming a file over a non-empty directory fails.
  await assertRejects(() => writeFileDurable(join(dir, "target"), "new"));
  assertEquals([...Deno.readDirSync(dir)].map((e) => e.name), ["target"]);
});

Deno.test("durable writes and ensureDir leave no file descriptor open", async () => {
  const dir = await Deno.realPath(await Deno.makeTempDir());
  // Only descriptors that point into this test's directory count: Deno opens
  // its own lazily (threads, child-process pipes), so a count of every
  // descriptor of the process moves with timing. Deno wants --allow-all to
  // read /proc itself: ask ls for the links' targets.
  const openInDir = async () => {
    const o = await new Deno.Command("ls", {
      args: ["-l", `/proc/${Deno.pid}/fd`],
      stdout: "piped",
    })
      .output();
    return new TextDecoder().decode(o.stdout).split("\n")
      .filter((l) => l.includes(` -> ${dir}/`) || l.endsWith(` -> ${dir}`));
  };
  // The check can fail: a descriptor left open into the directory is seen.
  const probe = await Deno.open(join(dir, "probe"), { write: true, create: true });
  assertEquals((await openInDir()).length, 1);
  probe.close();
  for (let i = 0; i < 50; i++) {
    await ensureDir(join(dir, `d${i}/e`));
    await writeFileDurable(join(dir, `d${i}/e/f`), "x");
  }
  await syncTree(dir);
  assertEquals(await openInDir(), []);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("removeStaleTemps of a path whose directory does not exist is not an error", async () => {
  const dir = await Deno.makeTempDir();
  await removeStaleTemps(join(dir, "no/such/dir/migration.json"));
  const stale = join(dir, ".j.json.tmp-1-abc");
  await Deno.writeTextFile(stale, "x");
  await removeStaleTemps(join(dir, "j.json"));
  await assertRejects(() => Deno.stat(stale));
});
