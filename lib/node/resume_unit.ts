import { join } from "node:path";
import { ensureDir, type HostPaths, writeFileDurable } from "../host/mod.ts";

/** The unit that finishes or rolls back an interrupted migration at boot. */
export const resumeUnit = "stratum-migrate-resume.service";

/**
 * The text of stratum-migrate-resume.service: runs `stratum migrate resume`
 * at boot, before either slot's stack starts, only when a journal exists.
 */
export function resumeUnitText(command: readonly string[]): string {
  return `# Written by stratum. Finishes or rolls back a migration a crash or power
# loss interrupted, before the node stack starts. Does nothing without a journal.
[Unit]
Description=Finish or roll back an interrupted Stratum migration
After=local-fs.target
Before=stratum-a.target stratum-b.target
ConditionPathExists=/var/lib/stratum/migration.json

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=${command.join(" ")} migrate resume
TimeoutStartSec=15min

[Install]
WantedBy=multi-user.target
`;
}

/** Installs and enables the resume unit under the root; returns whether it changed. */
export async function installResumeUnit(
  paths: HostPaths,
  command: readonly string[],
): Promise<boolean> {
  const path = join(paths.unitDir, resumeUnit);
  const text = resumeUnitText(command);
  if ((await Deno.readTextFile(path).catch(() => "")) === text) return false;
  await ensureDir(paths.unitDir);
  await writeFileDurable(path, text, { mode: 0o644 });
  const wants = join(paths.unitDir, "multi-user.target.wants");
  await ensureDir(wants);
  await Deno.symlink(`../${resumeUnit}`, join(wants, resumeUnit)).catch((err) => {
    if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
  });
  return true;
}
