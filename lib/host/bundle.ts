import { createHash } from "node:crypto";
import { cp } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { ensureDir, syncDir } from "./durable_file.ts";

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
 * Copies a bundle directory to `dest` and verifies the copy, so what the
 * slot is built from is exactly what the manifest names. The copy is made
 * beside `dest` and renamed into place: `dest` holds a whole verified bundle
 * or its previous content.
 */
export async function installBundle(src: string, dest: string): Promise<void> {
  await verifyBundle(src);
  const tmp = `${dest}.tmp-${Deno.pid}`;
  await Deno.remove(tmp, { recursive: true }).catch(() => {});
  await ensureDir(dirname(dest));
  await cp(src, tmp, { recursive: true, preserveTimestamps: true });
  await verifyBundle(tmp);
  await Deno.remove(dest, { recursive: true }).catch(() => {});
  await Deno.rename(tmp, dest);
  await syncDir(dirname(dest));
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
