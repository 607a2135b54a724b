import { cp } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { ensureDir, syncDir, syncTree } from "../host/durable_file.ts";
import { listTree } from "./manifest.ts";
import { type Verified, verifyBundle, type VerifyOptions } from "./verify.ts";

/**
 * Installs a bundle's mode directory at `dest` so that `dest` is always a
 * whole verified bundle, the old one or the new one, also across a power cut.
 *
 * The source is verified first (signature and files), and the copy again.
 * `dest` is a symlink to a versioned directory beside it (`.NAME-VERSION`),
 * as Kubernetes' atomic writer does for projected volumes. The new version
 * is copied, fsynced, verified, and then a new symlink is renamed over
 * `dest`, which swaps them in one step; old versions are removed after.
 * A real directory at `dest` (an earlier layout) is moved aside first.
 */
export async function installBundle(
  src: string,
  dest: string,
  opts: VerifyOptions = {},
): Promise<Verified> {
  const verified = await verifyBundle(src, opts);
  const parent = dirname(dest);
  const name = basename(dest);
  const version = `.${name}-${Date.now().toString(36)}-${Deno.pid}`;
  const tmp = join(parent, version);
  await ensureDir(parent);
  await Deno.remove(tmp, { recursive: true }).catch(() => {});
  await cp(src, tmp, { recursive: true, preserveTimestamps: true });
  await syncTree(tmp);
  await syncDir(parent);
  await verifyBundle(tmp, opts);
  const link = join(parent, `.${name}.link-${Deno.pid}`);
  await Deno.remove(link).catch(() => {});
  await Deno.symlink(version, link);
  const st = await Deno.lstat(dest).catch(() => undefined);
  if (st?.isDirectory) await Deno.rename(dest, join(parent, `.${name}-legacy-${Deno.pid}`));
  await Deno.rename(link, dest);
  await syncDir(parent);
  // Every other version of this bundle is now unreferenced.
  for await (const e of Deno.readDir(parent)) {
    if (e.name.startsWith(`.${name}-`) && e.name !== version) {
      await Deno.remove(join(parent, e.name), { recursive: true }).catch(() => {});
    }
  }
  await syncDir(parent);
  return verified;
}

/** Total size in bytes of the files under `dir`. */
export async function sizeOf(dir: string): Promise<number> {
  let n = 0;
  for (const f of await listTree(dir)) n += f.size;
  return n;
}
