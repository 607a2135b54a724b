import { basename, dirname, join } from "node:path";
import { ensureDir, syncDir, syncTree } from "../host/durable_file.ts";
import { BundleError } from "./errors.ts";
import { listTree } from "./manifest.ts";
import { normalizeModes } from "./modes.ts";
import { type Verified, verifyBundle, type VerifyOptions } from "./verify.ts";

/**
 * Installs a bundle's mode directory at `dest` so that `dest` is always a
 * whole verified bundle, the old one or the new one, also across a power cut:
 * {@linkcode stageBundle}, then {@linkcode promoteBundle}.
 */
export async function installBundle(
  src: string,
  dest: string,
  opts: VerifyOptions = {},
  checked?: Verified,
): Promise<Verified> {
  const verified = await stageBundle(src, stagedPath(dest), opts, checked);
  await promoteBundle(dest);
  return verified;
}

/**
 * The real directory an installed bundle `dest` names: stratum's own link
 * (`dest` → `.NAME-VERSION` beside it) resolved once, so the copy is then
 * verified and read as the directory it is; a real directory (an earlier
 * layout) or a missing path as it is. A link anywhere else is refused: only
 * stratum makes this link, and it never points out of its directory.
 */
export async function installedDir(dest: string): Promise<string> {
  const st = await Deno.lstat(dest).catch(() => undefined);
  if (!st?.isSymlink) return dest;
  const target = await Deno.readLink(dest);
  if (!target.startsWith(`.${basename(dest)}-`) || target.includes("/")) {
    throw new BundleError(
      "unsafe",
      `Installed bundle ${dest} links to ${target}, not to a version beside it: refused`,
    );
  }
  return join(dirname(dest), target);
}

/** Where a bundle about to replace `dest` is staged (beside it, hidden). */
export function stagedPath(dest: string): string {
  return join(dirname(dest), `.${basename(dest)}.next`);
}

/**
 * Verifies `src` (signature and files), copies it to `staged` (a real tree:
 * `src` must be a real directory and holds no links, or verification
 * refuses it), normalises its modes (see normalizeModes), fsyncs it and
 * verifies the copy, without touching what is installed: an upgrade stages
 * the new version and promotes it only once it is proven.
 *
 * `checked`, what this run's preflight already verified of `src`, spares
 * reading the source twice: the copy must then be that very bundle (the
 * same manifest digest), so a carrier that changed the bundle in between,
 * even for another validly signed one, is refused.
 */
export async function stageBundle(
  src: string,
  staged: string,
  opts: VerifyOptions = {},
  checked?: Verified,
): Promise<Verified> {
  const verified = checked ?? await verifyBundle(src, opts);
  await ensureDir(dirname(staged));
  await Deno.remove(staged, { recursive: true }).catch(() => {});
  const { cp } = await import("node:fs/promises");
  await cp(src, staged, { recursive: true, preserveTimestamps: true });
  await normalizeModes(staged);
  await syncTree(staged);
  await syncDir(dirname(staged));
  const copy = await verifyBundle(staged, opts);
  if (copy.manifestDigest !== verified.manifestDigest) {
    await Deno.remove(staged, { recursive: true }).catch(() => {});
    throw new BundleError(
      "changed",
      `Bundle ${src} changed while it was installed (manifest sha256 ${verified.manifestDigest} verified, ${copy.manifestDigest} copied): refused`,
    );
  }
  return verified;
}

/**
 * Makes the staged bundle (see {@linkcode stagedPath}) the one installed at
 * `dest`. `dest` is a symlink to a versioned directory beside it
 * (`.NAME-VERSION`), as Kubernetes' atomic writer does for projected
 * volumes: the staged tree is renamed to a new version, a new symlink is
 * renamed over `dest`, which swaps them in one step, and old versions are
 * removed after. A real directory at `dest` (an earlier layout) is moved
 * aside first. Idempotent: with nothing staged it does nothing, so a resume
 * may repeat it. Returns whether it promoted.
 */
export async function promoteBundle(dest: string): Promise<boolean> {
  const parent = dirname(dest);
  const name = basename(dest);
  const staged = stagedPath(dest);
  if (!(await Deno.lstat(staged).then((s) => s.isDirectory, () => false))) return false;
  const version = `.${name}-${Date.now().toString(36)}-${Deno.pid}`;
  await Deno.rename(staged, join(parent, version));
  await syncDir(parent);
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
  return true;
}

/** Removes a staged bundle that will not be promoted (an upgrade rolled back). */
export async function dropStaged(dest: string): Promise<void> {
  const staged = stagedPath(dest);
  await Deno.remove(staged, { recursive: true }).catch((err) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
  await syncDir(dirname(staged)).catch(() => {});
}

/** Total size in bytes of the files under `dir`. */
export async function sizeOf(dir: string): Promise<number> {
  let n = 0;
  for (const f of await listTree(dir)) n += f.size;
  return n;
}
