import { createHash } from "node:crypto";
import { cp } from "node:fs/promises";
import { basename, dirname, join, relative } from "node:path";
import { ensureDir, syncDir, syncTree } from "./durable_file.ts";

/** The manifest file in each mode's directory of a bundle, in `sha256sum` format. */
export const manifestName = "SHA256SUMS";

/** A bundle that must not be used: missing, extra or altered files, or no manifest. */
export class BundleError extends Error {
  override name = "BundleError";
  /** The file at fault, relative to the bundle's mode directory, when one is. */
  readonly file: string | undefined;
  constructor(message: string, file?: string) {
    super(message);
    this.file = file;
  }
}

/**
 * Checks every file of a bundle directory against its SHA256SUMS manifest
 * (`sha256sum -c` can check the same file by hand). A file missing, a file
 * not listed, or a digest that differs fails, naming the file. Returns the
 * number of files and bytes checked.
 */
export async function verifyBundle(dir: string): Promise<{ files: number; bytes: number }> {
  let manifest: string;
  try {
    manifest = await Deno.readTextFile(join(dir, manifestName));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new BundleError(`Bundle ${dir} has no ${manifestName} manifest (or does not exist)`);
    }
    throw err;
  }
  const listed = new Map<string, string>();
  for (const [i, line] of manifest.split("\n").entries()) {
    if (line.trim() === "") continue;
    const m = /^([0-9a-f]{64}) [ *](.+)$/.exec(line);
    if (!m || m[2]!.startsWith("/") || m[2]!.split("/").includes("..")) {
      throw new BundleError(`Bundle ${dir}: ${manifestName} line ${i + 1} is malformed`);
    }
    listed.set(m[2]!.replace(/^\.\//, ""), m[1]!);
  }
  const found = await listFiles(dir);
  for (const f of found) {
    if (f !== manifestName && !listed.has(f)) {
      throw new BundleError(`Bundle ${dir}: ${f} is not in ${manifestName}`, f);
    }
  }
  let bytes = 0;
  for (const [f, want] of listed) {
    if (!found.includes(f)) throw new BundleError(`Bundle ${dir}: ${f} is missing`, f);
    const data = await Deno.readFile(join(dir, f));
    bytes += data.length;
    const got = createHash("sha256").update(data).digest("hex");
    if (got !== want) throw new BundleError(`Bundle ${dir}: ${f} does not match its sha256`, f);
  }
  return { files: listed.size, bytes };
}

/**
 * Installs a bundle's mode directory at `dest` so that `dest` is always a
 * whole verified bundle, the old one or the new one, also across a power cut.
 *
 * `dest` is a symlink to a versioned directory beside it (`.NAME-VERSION`),
 * as Kubernetes' atomic writer does for projected volumes. The new version
 * is copied, fsynced, verified, and then a new symlink is renamed over
 * `dest`, which swaps them in one step; old versions are removed after.
 * A real directory at `dest` (an earlier layout) is moved aside first.
 */
export async function installBundle(src: string, dest: string): Promise<void> {
  await verifyBundle(src);
  const parent = dirname(dest);
  const name = basename(dest);
  const version = `.${name}-${Date.now().toString(36)}-${Deno.pid}`;
  const tmp = join(parent, version);
  await ensureDir(parent);
  await Deno.remove(tmp, { recursive: true }).catch(() => {});
  await cp(src, tmp, { recursive: true, preserveTimestamps: true });
  await syncTree(tmp);
  await syncDir(parent);
  await verifyBundle(tmp);
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
}

/** Total size in bytes of the files under `dir`. */
export async function sizeOf(dir: string): Promise<number> {
  let n = 0;
  for (const f of await listFiles(dir)) n += (await Deno.stat(join(dir, f))).size;
  return n;
}

async function listFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string) => {
    for await (const e of Deno.readDir(d)) {
      const p = join(d, e.name);
      if (e.isDirectory) await walk(p);
      else out.push(relative(dir, p));
    }
  };
  await walk(dir);
  return out.sort();
}
