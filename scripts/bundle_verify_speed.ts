/**
 * Benchmark: `stratum bundle verify` against `sha256sum -c SHA256SUMS` on the
 * same generated bundle, in the same run, page cache warm for both (each is
 * run once before timing). Prints wall times, their ratio, and each one's
 * peak memory (GNU time's maximum RSS); then stratum's peak on a bundle
 * whose largest file is 16 times smaller, to show the peak does not follow
 * the largest file.
 *
 * Usage: deno task bench:bundle [--mib 1024] [--runs 3]
 *
 * @module
 */
import $ from "dax";
import { join } from "node:path";
import * as bundle from "../lib/bundle/mod.ts";

const arg = (name: string, dflt: string) => {
  const i = Deno.args.indexOf(name);
  return Number(i >= 0 ? Deno.args[i + 1] : dflt);
};
const totalMiB = arg("--mib", "1024");
const runs = arg("--runs", "3");
const main = new URL("../main.ts", import.meta.url).pathname;
// deno-lint-ignore no-console
const say = (s: string) => console.log(s);

/** A bundle of `mib` MiB: four large files (3/4 of it) and 2000 small ones. */
async function generate(dir: string, mib: number): Promise<{ largestMiB: number }> {
  const m = join(dir, "host");
  await Deno.mkdir(join(m, "small"), { recursive: true });
  const largeMiB = Math.floor((mib * 3) / 4 / 4);
  for (let i = 0; i < 4; i++) {
    await $`head -c ${largeMiB * 1048576} /dev/urandom`.stdout($.path(join(m, `image-${i}.tar`)));
  }
  const smallBytes = Math.floor(((mib / 4) * 1048576) / 2000);
  const chunk = new Uint8Array(smallBytes);
  for (let i = 0; i < 2000; i++) {
    crypto.getRandomValues(chunk.subarray(0, Math.min(65536, chunk.length)));
    await Deno.writeFile(join(m, "small", `f${i}.bin`), chunk);
  }
  // What every bundle's mode directory has: the stack it runs (verify checks it too).
  await Deno.writeTextFile(
    join(m, "stack.json"),
    JSON.stringify({
      services: [{ name: "node", exec: ["/usr/bin/true"] }],
      health: { url: "http://127.0.0.1:1/healthz" },
    }),
  );
  await bundle.makeManifest(m);
  return { largestMiB: largeMiB };
}

/** Wall seconds and peak RSS (KiB) of a command, from GNU time. */
async function measure(argv: string[], cwd: string): Promise<{ s: number; kib: number }> {
  const out = await $`/usr/bin/time -f ${"%e %M"} ${argv}`.cwd(cwd).stdout("null").stderr("piped");
  const [s, kib] = out.stderr.trim().split("\n").pop()!.split(" ").map(Number) as [number, number];
  return { s, kib };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

const tmp = await Deno.makeTempDir({ prefix: "stratum-bundle-bench-" });
try {
  const root = join(tmp, "root");
  await Deno.mkdir(root);
  const big = join(tmp, "big");
  const small = join(tmp, "small");
  const { largestMiB } = await generate(big, totalMiB);
  const { largestMiB: smallLargest } = await generate(small, totalMiB / 16);
  const stratum = (dir: string) => [
    Deno.execPath(),
    "run",
    "-A",
    main,
    "bundle",
    "verify",
    dir,
    "--mode",
    "host",
    "--root",
    root,
  ];
  const sha = ["sha256sum", "-c", "--quiet", "SHA256SUMS"];
  // Warm the page cache and Deno's module cache.
  await measure(stratum(big), tmp);
  await measure(sha, join(big, "host"));
  const ours: { s: number; kib: number }[] = [];
  const theirs: { s: number; kib: number }[] = [];
  for (let i = 0; i < runs; i++) {
    ours.push(await measure(stratum(big), tmp));
    theirs.push(await measure(sha, join(big, "host")));
  }
  const smallPeak = median(
    await Promise.all([0, 1, 2].map(() => measure(stratum(small), tmp).then((r) => r.kib))),
  );
  const o = median(ours.map((r) => r.s));
  const t = median(theirs.map((r) => r.s));
  say(`bundle: ${totalMiB} MiB, 4 files of ${largestMiB} MiB and 2000 small ones, ${runs} runs`);
  say(
    `stratum bundle verify: ${o.toFixed(2)} s median, peak RSS ${
      median(ours.map((r) => r.kib))
    } KiB`,
  );
  say(
    `sha256sum -c:          ${t.toFixed(2)} s median, peak RSS ${
      median(theirs.map((r) => r.kib))
    } KiB`,
  );
  say(`ratio stratum / sha256sum: ${(o / t).toFixed(2)}`);
  say(
    `stratum's peak RSS with the largest file ${smallLargest} MiB instead of ${largestMiB} MiB: ${smallPeak} KiB`,
  );
} finally {
  await Deno.remove(tmp, { recursive: true });
}
