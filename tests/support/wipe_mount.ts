// deno-lint-ignore-file no-console
// Run as root in a private mount namespace (`unshare --mount --propagation
// private deno run -A wipe_mount.ts ROOT`) by trust_boundary_test.ts: a data
// disk mounted at a state path (a tmpfs stands in for it), wiped; then one
// with a file system mounted below it, whose wipe must be refused before
// anything is removed. Prints one JSON document.
import { join } from "node:path";
import { hostPaths } from "../../lib/host/mod.ts";
import * as isolation from "../../lib/isolation/mod.ts";

const root = Deno.args[0]!;
const paths = hostPaths(root);
const mount = async (dir: string) => {
  await Deno.mkdir(dir, { recursive: true });
  const o = await new Deno.Command("mount", { args: ["-t", "tmpfs", "tmpfs", dir] }).output();
  if (!o.success) throw new Error(`mount ${dir}: ${new TextDecoder().decode(o.stderr)}`);
};
const mounted = async (dir: string) =>
  (await new Deno.Command("mountpoint", { args: ["-q", dir] }).output()).success;
const list = async (dir: string) => {
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) names.push(e.name);
  return names.sort();
};

const disk = join(root, "var/lib/etcd");
await mount(disk);
await Deno.mkdir(join(disk, "member/wal"), { recursive: true });
await Deno.writeTextFile(join(disk, "member/wal/0.wal"), "data\n");
await isolation.wipeState(paths, ["/var/lib/etcd"]);
const wiped = {
  exists: await Deno.stat(disk).then(() => true, () => false),
  left: await list(disk),
  mounted: await mounted(disk),
};

const outer = join(root, "var/lib/kubelet");
await mount(outer);
await Deno.writeTextFile(join(outer, "keep"), "data\n");
await mount(join(outer, "pods/uid/volumes/secret"));
let refused = "";
try {
  await isolation.wipeState(paths, ["/var/lib/kubelet"]);
} catch (err) {
  refused = `${(err as Error).name}: ${(err as Error).message}`;
}
console.log(JSON.stringify({ wiped, refused, nestedLeft: await list(outer) }));
