import { join } from "node:path";
import { BundleError } from "./errors.ts";
import { eachLimited, hashConcurrency, hashFile, manifestName, parseManifest } from "./manifest.ts";
import { readSmallFile } from "../host/small_file.ts";
import { wroteHashed, wroteIt } from "./_written.ts";

/**
 * Gives every file and directory under `dir` the mode root may run it with:
 * directories 0755, files 0755 when the bundle had any execute bit and 0644
 * otherwise; no setuid, setgid or sticky bit, no group or world write. What
 * a bundle's carrier set is not what root keeps: an installed copy or slot
 * with a world-writable script is a script any local user can rewrite.
 * Links are left alone (a verified bundle has none; a slot's are its own).
 */
export async function normalizeModes(dir: string): Promise<void> {
  const walk = async (d: string) => {
    await Deno.chmod(d, 0o755);
    for await (const e of Deno.readDir(d)) {
      const p = join(d, e.name);
      if (e.isDirectory) await walk(p);
      else if (e.isFile) {
        const mode = (await Deno.lstat(p)).mode ?? 0;
        await Deno.chmod(p, mode & 0o111 ? 0o755 : 0o644);
      }
    }
  };
  await walk(dir);
}

/**
 * Checks a built slot before its stack starts: every file its manifest
 * (the bundle's, copied in) lists is there with that sha256, and nothing
 * under the slot is setuid, setgid, writable by group or others, or owned
 * by another user or group than stratum's (root's: a node image is unpacked
 * as root's tree, node_image.ts). Files the slot adds beyond the bundle
 * (nspawn's empty mount points and links) are allowed. Costs one hash pass over the bundle's files, but for those
 * this process wrote and hashed itself (a slot linked from the copy it just
 * staged, _written.ts).
 */
export async function checkSlot(dir: string): Promise<void> {
  const text = await readSmallFile(join(dir, manifestName), 16 << 20);
  if (!text) throw new BundleError("manifest", `Slot ${dir} has no ${manifestName}`, manifestName);
  const listed = parseManifest(new TextDecoder().decode(text), dir);
  await eachLimited([...listed], hashConcurrency(), async ([f, want]) => {
    const st = await Deno.lstat(join(dir, f)).catch(() => undefined);
    // Linked from a copy this process just wrote and hashed, unchanged since.
    if (st && wroteHashed(st, want)) return;
    const got = await hashFile(join(dir, f)).catch(() => "missing");
    if (got !== want) {
      throw new BundleError(
        "file",
        `Slot ${dir}: ${f} ${got === "missing" ? "is missing" : "does not match its sha256"}`,
        f,
      );
    }
  });
  // Root's on a node: the user and group stratum runs as.
  const uid = Deno.uid() ?? 0;
  const gid = Deno.gid() ?? 0;
  const walk = async (d: string, rel: string) => {
    for await (const e of Deno.readDir(d)) {
      if (e.isSymlink) continue;
      const p = join(d, e.name);
      const st = await Deno.lstat(p);
      const mode = st.mode ?? 0;
      if (mode & 0o7022) {
        throw new BundleError(
          "unsafe",
          `Slot ${dir}: ${rel}${e.name} has mode ${
            (mode & 0o7777).toString(8)
          } (setuid, setgid or writable by others)`,
          `${rel}${e.name}`,
        );
      }
      if (st.uid !== uid || st.gid !== gid) {
        throw new BundleError(
          "unsafe",
          `Slot ${dir}: ${rel}${e.name} is owned by ${st.uid}:${st.gid}, not ${
            uid === 0 && gid === 0 ? "root" : `${uid}:${gid}`
          } (another user or group could change or read it)`,
          `${rel}${e.name}`,
        );
      }
      if (e.isDirectory) await walk(p, `${rel}${e.name}/`);
    }
  };
  await walk(dir, "");
}

/**
 * Makes `to` a copy of the tree `from` (which has no links: a verified
 * bundle): a file this process wrote into stratum's own copy and has not
 * changed since is hard-linked, so a slot costs no second write of the
 * bundle; any other file (another process's copy, another file system) is
 * copied. Directories are made 0755. Nothing is fsynced here.
 */
export async function linkOrCopyTree(from: string, to: string): Promise<void> {
  await Deno.mkdir(to, { mode: 0o755 });
  for await (const e of Deno.readDir(from)) {
    const src = join(from, e.name);
    const dst = join(to, e.name);
    if (e.isDirectory) {
      await linkOrCopyTree(src, dst);
      continue;
    }
    if (!e.isFile) {
      throw new BundleError(
        "unsafe",
        `${src} is a link or special file: a slot is built from plain files`,
      );
    }
    const st = await Deno.lstat(src);
    if (wroteIt(st)) {
      try {
        await Deno.link(src, dst);
        continue;
      } catch {
        // Another file system, or links refused: copy it.
      }
    }
    await Deno.copyFile(src, dst);
    if (st.mtime) await Deno.utime(dst, st.atime ?? st.mtime, st.mtime);
  }
}
