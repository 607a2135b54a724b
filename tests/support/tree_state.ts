import { join } from "node:path";

/**
 * Every entry under `root` with its kind, mode and bytes: what "nothing
 * changed" compares. /run is left out: the lock file a command makes there
 * to take the lock is runtime state, gone at the next boot.
 */
export async function treeState(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string) => {
    for await (const e of Deno.readDir(join(root, rel))) {
      const p = rel ? `${rel}/${e.name}` : e.name;
      if (p === "run") continue;
      const st = await Deno.lstat(join(root, p));
      if (e.isDirectory) {
        out.push(`${p}/ ${st.mode?.toString(8)}`);
        await walk(p);
      } else if (e.isSymlink) out.push(`${p} -> ${await Deno.readLink(join(root, p))}`);
      else out.push(`${p} ${st.mode?.toString(8)} ${await Deno.readTextFile(join(root, p))}`);
    }
  };
  await walk("");
  return out.sort();
}
