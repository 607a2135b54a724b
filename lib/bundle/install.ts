import type { promises as fsp } from "node:fs";
import { basename, dirname, join } from "node:path";
import {
  ensureDir,
  ErrNoSpace,
  isNoSpace,
  symlinkDurable,
  syncDir,
  syncTree,
} from "../host/durable_file.ts";
import { BundleReader } from "./_reader.ts";
import { formatRecord, type RecordedFile } from "./installed_check.ts";
import { BundleError } from "./errors.ts";
import {
  eachLimited,
  hashConcurrency,
  hashHandle,
  listTree,
  manifestName,
  recordName,
  signatureName,
} from "./manifest.ts";
import { type Verified, VerifiedContent, verifyBundle, type VerifyOptions } from "./verify.ts";
import { noteWritten } from "./_written.ts";
import { Held } from "./_held.ts";

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
  hooks: StageHooks = {},
): Promise<Verified> {
  const verified = await stageBundle(src, stagedPath(dest), opts, checked, hooks);
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

/** Seams for tests of the carrier's races. */
export interface StageHooks {
  /** Called before each listed file is opened for the copy, with its path in the bundle. */
  readonly beforeCopy?: (file: string) => Promise<void>;
}

/**
 * Copies the verified bundle `src` to `staged`, without touching what is
 * installed: an upgrade stages the new version and promotes it only once it
 * is proven. What is copied is what was verified, from what was verified:
 * only the files the manifest lists, each opened without following a link or
 * blocking and checked to be the inode that was hashed (see BundleReader),
 * hashed again as it is copied and compared with the manifest; the manifest and signature are written from
 * the bytes that were checked, not read again. Files get the mode stratum
 * chooses (0755 when the bundle's file had an execute bit, else 0644; never
 * setuid or setgid, never writable by others), directories 0755, all inside
 * a staging directory that stays 0700 until the whole copy matched. Any
 * failure removes the staging directory. The copy is fsynced before this
 * returns.
 *
 * `checked`, what this run's preflight already verified of `src`, spares
 * reading the source twice: the copy is held to it, so a carrier that
 * changed the bundle in between, even for another validly signed one, is
 * refused. A `checked` whose hashes were deferred (VerifyOptions.deferHashes)
 * is completed by this copy: the source is then read exactly once, and the
 * result is a whole verification. Each file is noted as written and hashed
 * (_written.ts), so a slot built from the copy links it and is not hashed
 * again by this process. A file whose bytes an installed release beside
 * `staged` already holds is hashed there and linked instead of written
 * (_held.ts); its copy in `src` is still hashed.
 */
export async function stageBundle(
  src: string,
  staged: string,
  opts: VerifyOptions = {},
  checked?: Verified,
  hooks: StageHooks = {},
): Promise<Verified> {
  const verified = checked ?? await verifyBundle(src, opts);
  const deferred = verified.content.deferred;
  await ensureDir(dirname(staged));
  await Deno.remove(staged, { recursive: true }).catch((err) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
  try {
    await copyVerified(src, staged, verified.content, hooks);
  } catch (err) {
    await Deno.remove(staged, { recursive: true }).catch(() => {});
    await syncDir(dirname(staged)).catch(() => {});
    // With the hashes deferred to this copy, a file that does not match is
    // found here for the first time: said as verifyBundle says it.
    const changed = err instanceof BundleError &&
      (err.fault === "unsafe" || (err.fault === "file" && !deferred));
    if (changed) {
      throw new BundleError(
        "changed",
        `Bundle ${src} changed after it was verified (manifest sha256 ${verified.manifestDigest}): ${err.message}; nothing installed`,
        err.file,
      );
    }
    throw err;
  }
  if (!deferred) return verified;
  // Every file matched as it was copied: now a whole verification.
  const c = verified.content;
  return {
    ...verified,
    content: new VerifiedContent({
      manifest: c.manifest,
      signature: c.signature,
      listed: c.listed,
      kept: c.kept,
      inodes: c.inodes,
      signer: c.signer,
    }),
  };
}

/** The copy of stageBundle; `staged` does not exist yet. */
async function copyVerified(
  src: string,
  staged: string,
  content: VerifiedContent,
  hooks: StageHooks,
): Promise<void> {
  const { promises, constants } = await import("node:fs");
  await Deno.mkdir(staged, { mode: 0o700 });
  await Deno.chmod(staged, 0o700);
  const dirs = new Set<string>();
  for (const f of content.listed.keys()) {
    for (let i = f.indexOf("/"); i > 0; i = f.indexOf("/", i + 1)) dirs.add(f.slice(0, i));
  }
  for (const d of [...dirs].sort()) {
    await Deno.mkdir(join(staged, d), { mode: 0o755 });
    await Deno.chmod(join(staged, d), 0o755);
  }
  const create = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  const write = async (
    f: string,
    fill: (out: fsp.FileHandle) => Promise<number>,
    sha256?: string,
  ) => {
    try {
      const fh = await promises.open(join(staged, f), create, 0o600);
      try {
        const mode = await fill(fh);
        await fh.chmod(mode);
        await fh.sync();
      } finally {
        await fh.close();
      }
    } catch (err) {
      // A full file system names the file (the copy is never used half-made).
      throw isNoSpace(err) ? new ErrNoSpace(join(staged, f), { cause: err }) : err;
    }
    await noteWritten(join(staged, f), sha256);
  };
  const b = await BundleReader.open(src);
  const record = new Map<string, RecordedFile>();
  const held = await Held.beside(staged);
  await eachLimited([...content.listed], hashConcurrency(), async ([f, want]) => {
    await hooks.beforeCopy?.(f);
    const from = await b.file(f, content.inodes.get(f));
    try {
      const exec = ((await from.stat()).mode & 0o111) !== 0;
      const mode = exec ? 0o755 : 0o644;
      // Bytes the node already holds, hashed again there: linked, not
      // written. The operator's file is still hashed, so a bundle that does
      // not match its manifest is refused whatever the node holds.
      const size = await held.linkTo(want, mode, join(staged, f));
      if (size !== undefined) {
        if ((await hashHandle(from)) !== want) {
          throw new BundleError("file", `Bundle ${src}: ${f} does not match its sha256`, f);
        }
        record.set(f, { size, mode });
        // Its bytes were made durable when it was first staged; the new
        // link count is the inode's, fsynced like a copied file.
        const linked = await promises.open(
          join(staged, f),
          constants.O_RDONLY | constants.O_NOFOLLOW,
        );
        try {
          await linked.sync();
        } finally {
          await linked.close();
        }
        await noteWritten(join(staged, f), want);
        return;
      }
      await write(f, async (out) => {
        let at = 0;
        const got = await hashHandle(from, async (chunk) => {
          while (chunk.length > 0) {
            const { bytesWritten } = await out.write(chunk, 0, chunk.length, at);
            at += bytesWritten;
            chunk = chunk.subarray(bytesWritten);
          }
        });
        if (got !== want) {
          throw new BundleError("file", `Bundle ${src}: ${f} does not match its sha256`, f);
        }
        record.set(f, { size: at, mode });
        return mode;
      }, want);
    } finally {
      await from.close();
    }
  });
  await write(manifestName, async (out) => {
    await out.writeFile(content.manifest);
    return 0o644;
  });
  if (content.signature) {
    const sig = content.signature;
    await write(signatureName, async (out) => {
      await out.writeFile(sig);
      return 0o644;
    });
  }
  // What node status checks cheaply: sizes and modes as copied.
  await write(recordName, async (out) => {
    await out.writeFile(new TextEncoder().encode(formatRecord(record, content.signer)));
    return 0o644;
  });
  await syncTree(staged, { dirsOnly: true });
  // Whole and matching: now it may be read by the stack's users.
  await Deno.chmod(staged, 0o755);
  await syncDir(staged);
  await syncDir(dirname(staged));
}

/** The link beside an installed bundle `dest` that names the release it replaced (kept by an upgrade). */
export function previousPath(dest: string): string {
  return join(dirname(dest), `.${basename(dest)}.previous`);
}

/**
 * The release an upgrade replaced at `dest`, kept for `node rollback`: the
 * real directory its `.NAME.previous` link names (stratum's own link, read
 * as installedDir reads `dest`), or undefined when none is kept.
 */
export async function previousDir(dest: string): Promise<string | undefined> {
  const link = previousPath(dest);
  const st = await Deno.lstat(link).catch(() => undefined);
  if (!st?.isSymlink) return undefined;
  const target = await Deno.readLink(link);
  if (!target.startsWith(`.${basename(dest)}-`) || target.includes("/")) {
    throw new BundleError(
      "unsafe",
      `Kept bundle ${link} links to ${target}, not to a version beside it: refused`,
    );
  }
  const dir = join(dirname(dest), target);
  return (await Deno.lstat(dir).then((s) => s.isDirectory, () => false)) ? dir : undefined;
}

/**
 * Makes the staged bundle (see {@linkcode stagedPath}) the one installed at
 * `dest`. `dest` is a symlink to a versioned directory beside it
 * (`.NAME-VERSION`), as Kubernetes' atomic writer does for projected
 * volumes: the staged tree is renamed to a new version, a new symlink is
 * renamed over `dest`, which swaps them in one step, and old versions are
 * removed after. A real directory at `dest` (an earlier layout) is moved
 * aside first. With `keepPrevious` (an upgrade), the version `dest` named
 * until now is kept, named by the `.NAME.previous` link (made durably
 * before the swap), for `node rollback`; one release is kept, the one
 * before it removed. Idempotent: with nothing staged it does nothing, so a
 * resume may repeat it. Returns whether it promoted.
 */
export async function promoteBundle(
  dest: string,
  opts: { keepPrevious?: boolean } = {},
): Promise<boolean> {
  const parent = dirname(dest);
  const name = basename(dest);
  const staged = stagedPath(dest);
  if (!(await Deno.lstat(staged).then((s) => s.isDirectory, () => false))) return false;
  const version = `.${name}-${Date.now().toString(36)}-${Deno.pid}`;
  await Deno.rename(staged, join(parent, version));
  await syncDir(parent);
  const current = await Deno.readLink(dest).catch(() => undefined);
  let kept: string | undefined;
  if (opts.keepPrevious && current?.startsWith(`.${name}-`) && !current.includes("/")) {
    kept = current;
    await symlinkDurable(current, previousPath(dest));
  }
  const link = join(parent, `.${name}.link-${Deno.pid}`);
  await Deno.remove(link).catch(() => {});
  await Deno.symlink(version, link);
  const st = await Deno.lstat(dest).catch(() => undefined);
  if (st?.isDirectory) await Deno.rename(dest, join(parent, `.${name}-legacy-${Deno.pid}`));
  await Deno.rename(link, dest);
  await syncDir(parent);
  // Every other version of this bundle is now unreferenced (but the kept one).
  const keptNow = kept ?? await Deno.readLink(previousPath(dest)).catch(() => undefined);
  for await (const e of Deno.readDir(parent)) {
    if (e.name.startsWith(`.${name}-`) && e.name !== version && e.name !== keptNow) {
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
