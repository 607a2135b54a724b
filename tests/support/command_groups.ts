// The program's command groups with dependencies that are never called, for
// tests that inspect the command tree (tests/docs_test.ts,
// tests/cli_contract_test.ts) without running a command.
import * as cli from "../../lib/cli/mod.ts";

export function allGroups(): cli.Group[] {
  const deps = {
    systemctl: () => {
      throw new Error("not run");
    },
    interrupted: new AbortController().signal,
    selfCommand: { exec: ["stratum"] },
    failpoint: undefined,
    killSelf: () => {},
  } as unknown as cli.Deps;
  return [
    cli.rolloutGroup({
      kubectl: () => Promise.reject(new Error("not run")),
      commandLine: (a: string) => `kubectl ${a}`,
      interrupted: new AbortController().signal,
    } as unknown as cli.RolloutDeps),
    cli.migrateGroup(deps),
    cli.bundleGroup(),
    cli.nodeGroup(deps),
  ];
}
