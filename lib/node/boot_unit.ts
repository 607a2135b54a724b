import { dirname, join } from "node:path";
import {
  ensureDir,
  type HostPaths,
  quoteEnvAssignment,
  quoteExecArg,
  removeFileDurable,
  sha256Hex,
  symlinkDurable,
  writeFileDurable,
} from "../host/mod.ts";

/** The unit that brings the node stack up at every boot. */
export const bootUnit = "stratum-boot.service";

/** The boot-time resume unit of earlier versions, replaced by {@linkcode bootUnit}. */
export const legacyResumeUnit = "stratum-migrate-resume.service";

/** How systemd runs this tool: the executable and its arguments, and environment it needs. */
export interface SelfCommand {
  readonly argv: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  /**
   * The one file this program is (the launcher or a compiled executable),
   * when it is one: the boot unit runs a root-owned copy of it, never the
   * path it happened to be started from.
   */
  readonly file?: string;
}

/** Where the boot unit's copy of stratum lives (a directory only root writes). */
export const installedSelf = "/var/lib/stratum/bin/stratum";

/**
 * The text of stratum-boot.service. It runs `stratum node boot`, which
 * resolves an interrupted migration (resume) and then starts the slot
 * /etc/stratum/node.json names, so it is the only thing that starts a node
 * stack at boot: the slot targets have no [Install] section.
 *
 * It has no `Before=` on the slot targets on purpose. It starts them itself
 * and waits for the start to finish; ordering it before them would make
 * their start jobs wait for it while it waits for them, a job deadlock that
 * systemd only breaks at the start timeout.
 */
export function bootUnitText(self: SelfCommand): string {
  const env = Object.entries(self.env ?? {}).map(([k, v]) =>
    `Environment=${quoteEnvAssignment(`${k}=${v}`)}\n`
  ).join("");
  return `# Written by stratum. At every boot: finish or roll back a migration a crash
# or power loss interrupted, then start the node stack node.json names.
[Unit]
Description=Stratum node stack: resolve an interrupted migration, start the applied slot
StartLimitIntervalSec=10min
StartLimitBurst=5
After=local-fs.target network-pre.target stratum-firewall-flush.service

[Service]
Type=oneshot
RemainAfterExit=yes
${env}ExecStart=${self.argv.map(quoteExecArg).join(" ")} node boot
TimeoutStartSec=15min
# Killed or failed to start the stack: try again. 2 (bad input) and 3 (needs
# attention) are a person's to resolve; the journal's loop guard bounds the rest.
Restart=on-failure
RestartSec=5s
RestartPreventExitStatus=2 3

[Install]
WantedBy=multi-user.target
`;
}

/**
 * Installs and enables the boot unit under the root (and removes the
 * earlier resume unit); returns whether unit files changed, so the caller
 * reloads systemd. Idempotent.
 */
export async function installBootUnit(paths: HostPaths, self: SelfCommand): Promise<boolean> {
  const path = join(paths.unitDir, bootUnit);
  const copied = self.file ? await installSelf(paths, self.file) : false;
  const text = bootUnitText(self.file ? { argv: [installedSelf] } : self);
  const wants = join(paths.unitDir, "multi-user.target.wants");
  let changed = false;
  for (const old of [join(wants, legacyResumeUnit), join(paths.unitDir, legacyResumeUnit)]) {
    if (await Deno.lstat(old).then(() => true, () => false)) {
      await removeFileDurable(old);
      changed = true;
    }
  }
  if ((await Deno.readTextFile(path).catch(() => "")) !== text) {
    await ensureDir(paths.unitDir);
    await writeFileDurable(path, text, { mode: 0o644 });
    changed = true;
  }
  await ensureDir(wants);
  // The enablement link is the install's last write: it must be on disk
  // before the command returns, or a power cut right after leaves the node
  // with no boot unit and nothing starts.
  if (await symlinkDurable(`../${bootUnit}`, join(wants, bootUnit))) changed = true;
  return changed || copied;
}

/**
 * Copies this program (`from`) to {@linkcode installedSelf} under the root,
 * durably, mode 0755 in a directory only root writes, when the copy there
 * differs (by sha256). A copy in a user's home run once as root must not be
 * what root runs at every boot, changeable by that user. Returns whether it
 * copied.
 */
async function installSelf(paths: HostPaths, from: string): Promise<boolean> {
  const dest = paths.at(installedSelf);
  const digest = async (p: string) => await sha256Hex(await Deno.readFile(p));
  if (await digest(dest).catch(() => "") === await digest(from)) return false;
  await ensureDir(dirname(dest), 0o755);
  await writeFileDurable(dest, await Deno.readFile(from), { mode: 0o755 });
  return true;
}

function realPath(p: string | undefined): string | undefined {
  try {
    return p ? Deno.realPathSync(p) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * How systemd runs this program: the one-file launcher's own path when it
 * started us (STRATUM_SELF), the executable itself when compiled, else
 * Deno running `main` with this checkout's config, and the cache directory
 * it was run with (a unit has no HOME to find it by).
 */
export function selfCommand(main: string): SelfCommand {
  // The one-file launcher names itself: its stable path, never its unpacked cache.
  // It passes its $0 (a `readlink -f` would cost every run a process).
  const launcher = realPath(Deno.env.get("STRATUM_SELF"));
  if (launcher) return { argv: [launcher], file: launcher };
  const exec = Deno.execPath();
  if (!exec.endsWith("/deno")) return { argv: [exec], file: exec };
  const config = new URL("./deno.json", new URL(".", main)).pathname;
  const home = Deno.env.get("HOME");
  const denoDir = Deno.env.get("DENO_DIR") ??
    (Deno.env.get("XDG_CACHE_HOME") ?? (home ? `${home}/.cache` : undefined))?.concat("/deno");
  return {
    argv: [exec, "run", "-A", "--config", config, new URL(main).pathname],
    ...(denoDir ? { env: { DENO_DIR: denoDir } } : {}),
  };
}
