import type { Command } from "commander";
import { join } from "node:path";
import * as bundle from "../bundle/mod.ts";
import { messageOf } from "../errors/mod.ts";
import { writeFileDurable } from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";
import * as node from "../node/mod.ts";
import { ErrUsage, ExitOK, ExitUsage } from "./exit.ts";
import { checkMode, rootPaths } from "./flags.ts";
import { type Context, jsonOption } from "./program.ts";

/** `stratum bundle make|sign|verify`. */
export function bundleGroup() {
  return (program: Command, ctx: Context): void => {
    const group = program
      .command("bundle")
      .description("make, sign and verify the bundles nodes run")
      .addHelpText(
        "after",
        "\nA bundle is a directory with one subdirectory per mode (host, nspawn), each holding\n" +
          "a SHA256SUMS manifest and, once signed, SHA256SUMS.sig: the raw Ed25519 signature of\n" +
          "the manifest. A node that has public keys in /etc/stratum/trust/*.pem uses only bundles\n" +
          "one of them signed. Keys are plain OpenSSL Ed25519 keys:\n" +
          "  openssl genpkey -algorithm ed25519 -out signing.pem\n" +
          "  openssl pkey -in signing.pem -pubout -out /etc/stratum/trust/release.pem\n" +
          "\nExample:\n" +
          "  stratum bundle make /srv/bundle && stratum bundle sign /srv/bundle --key signing.pem\n" +
          "  stratum bundle verify /srv/bundle --mode nspawn",
      );

    group.command("make")
      .description(
        "write BUNDLE.json (the mode and version the signature will cover) and SHA256SUMS in each " +
          "mode directory of DIR (removes a stale signature)",
      )
      .argument("<dir>", "the bundle directory")
      .option(
        "--version <version>",
        "the bundle's version, dotted numbers (1.2.10); nodes refuse an older one than they run " +
          "unless --allow-downgrade (default: the version BUNDLE.json has, else 0)",
      )
      .addOption(jsonOption())
      .action(async (dir: string, opts: { version?: string; json?: boolean }) => {
        const out = ctx.output(opts);
        const modes = await modeDirs(dir);
        if (opts.version !== undefined && bundle.versionProblem(opts.version)) {
          throw new ErrUsage(`--version: ${bundle.versionProblem(opts.version)}`);
        }
        const made: ({ mode: isolation.Mode; version: string; files: number; bytes: number })[] =
          [];
        // Everything that would refuse is found before anything is written:
        // a refused make leaves the bundle (and its signature) as it was.
        for (const mode of modes) {
          await usage(bundle.readIdentity(join(dir, mode)));
          await usage(bundle.manifestable(join(dir, mode)));
        }
        for (const mode of modes) {
          const had = await usage(bundle.readIdentity(join(dir, mode)));
          const version = opts.version ?? had?.version ?? "0";
          await usage(bundle.writeIdentity(join(dir, mode), { mode, version }));
          made.push({ mode, version, ...(await usage(bundle.makeManifest(join(dir, mode)))) });
        }
        out.result(
          {
            outcome: "made",
            modes: made,
            nextAction: `sign it: stratum bundle sign ${dir} --key KEY.pem (or with openssl)`,
          },
          () =>
            made.map((m) =>
              `${m.mode} (version ${m.version}): ${bundle.manifestName} lists ${m.files} files, ${m.bytes} bytes`
            ),
        );
      });

    group.command("sign")
      .description(
        "sign each mode's SHA256SUMS with an Ed25519 private key (writes SHA256SUMS.sig)",
      )
      .argument("<dir>", "the bundle directory")
      .requiredOption("--key <file>", "the private key, PEM (openssl genpkey -algorithm ed25519)")
      .addOption(jsonOption())
      .action(async (dir: string, opts: { key: string; json?: boolean }) => {
        const out = ctx.output(opts);
        const modes = await modeDirs(dir);
        const pem = await Deno.readTextFile(opts.key).catch((err) => {
          throw new ErrUsage(`--key ${opts.key}: ${messageOf(err)}`);
        });
        const key = await usage(bundle.readPrivateKey(pem, opts.key));
        const manifests = await Promise.all(modes.map(async (mode) => {
          const path = join(dir, mode, bundle.manifestName);
          const data = await Deno.readFile(path).catch(() => {
            throw new ErrUsage(`${path} is missing: run stratum bundle make ${dir} first`);
          });
          return { mode, data };
        }));
        for (const { mode, data } of manifests) {
          const sig = await bundle.sign(data, key);
          await writeFileDurable(join(dir, mode, bundle.signatureName), sig, { mode: 0o644 });
        }
        out.result(
          {
            outcome: "signed",
            keyId: key.id,
            modes,
            publicKey: key.publicPem,
            nextAction: `install the public key on the nodes as /etc/stratum/trust/<name>.pem`,
          },
          () => [
            `signed ${modes.join(", ")} with key ${key.id}`,
            "nodes trust it with this public key in /etc/stratum/trust/<name>.pem:",
            key.publicPem.trimEnd(),
          ],
        );
      });

    group.command("verify")
      .description(
        "verify a bundle: the signature against this node's trusted keys, then every file",
      )
      .argument("<dir>", "the bundle directory")
      .option("--mode <mode>", `only this mode (${isolation.modes.join(", ")})`)
      .option(
        "--root <dir>",
        "prefix for every host path: the trust store is ROOT/etc/stratum/trust",
        "/",
      )
      .option("--require-signature", "refuse an unsigned bundle even when no key is trusted")
      .addOption(jsonOption())
      .addHelpText(
        "after",
        "\nExit 0 when it verifies, 2 when it does not (the message names the file or key).",
      )
      .action(
        async (
          dir: string,
          opts: { mode?: string; root: string; requireSignature?: boolean; json?: boolean },
        ) => {
          const out = ctx.output(opts);
          const paths = await rootPaths(opts.root);
          const modes = opts.mode ? [checkMode(opts.mode)] : await modeDirs(dir);
          // The node's own installed bundles: stratum's links, resolved once.
          const installed = (await Deno.realPath(dir).catch(() => dir)) ===
            (await Deno.realPath(paths.bundlesDir).catch(() => paths.bundlesDir));
          const modeDir = (mode: isolation.Mode) =>
            installed ? bundle.installedDir(join(dir, mode)) : Promise.resolve(join(dir, mode));
          const policy = await usage(node.bundlePolicy(paths, opts.requireSignature === true));
          const verified: (bundle.Verified & { mode: isolation.Mode })[] = [];
          let refused: string | undefined;
          for (const mode of modes) {
            try {
              const v = await bundle.verifyBundle(await modeDir(mode), {
                ...policy,
                mode,
                ...(installed ? { installed } : {}),
              });
              // What the stack declares is checked too: a bad state entry or
              // an unknown field refuses the bundle here, not on a node.
              const stack = node.stackOf(v, join(dir, mode), mode);
              await node.checkKernelFiles(v, await modeDir(mode), join(dir, mode), stack);
              verified.push({ mode, ...v });
            } catch (err) {
              if (!(err instanceof bundle.BundleError || err instanceof isolation.ErrBadStack)) {
                throw err;
              }
              refused = err.message;
              break;
            }
          }
          const warnings = verified.flatMap((v) => v.warnings);
          for (const w of warnings) out.log(`warning: ${w}`);
          out.result(
            {
              outcome: refused ? "refused" : "verified",
              ...(refused ? { message: refused } : {}),
              trustedKeys: (policy.trust ?? []).map((k) => k.id),
              modes: verified.map((v) => ({
                mode: v.mode,
                digest: v.manifestDigest,
                files: v.files,
                bytes: v.bytes,
                ...(v.keyId ? { keyId: v.keyId } : {}),
                ...(v.identity ? { version: v.identity.version } : {}),
                warnings: v.warnings,
              })),
              nextAction: refused ? "fix what the message names; the bundle is not used" : "none",
            },
            () =>
              refused
                ? [`refused: ${refused}`]
                : verified.map((v) =>
                  `${v.mode}: ${v.files} files, ${v.bytes} bytes verified${
                    v.keyId ? `, signed by trusted key ${v.keyId}` : ", not signature-checked"
                  }`
                ),
          );
          if (refused) out.error(refused);
          ctx.exitCode = refused ? ExitUsage : ExitOK;
        },
      );
  };
}

/** The mode directories (host, nspawn) in a bundle; none is bad input. */
async function modeDirs(dir: string): Promise<isolation.Mode[]> {
  const found: isolation.Mode[] = [];
  for (const m of isolation.modes) {
    // stat: the node's installed bundles are links to their versions.
    const st = await Deno.stat(join(dir, m)).catch(() => undefined);
    if (st?.isDirectory) found.push(m);
  }
  if (found.length === 0) {
    throw new ErrUsage(
      `${dir} is not a bundle: it has no mode directory (${isolation.modes.join(", ")})`,
    );
  }
  return found;
}

/** A bad key or trust store is bad input: exit 2, nothing changed. */
async function usage<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof bundle.BundleError) throw new ErrUsage(err.message);
    throw err;
  }
}
