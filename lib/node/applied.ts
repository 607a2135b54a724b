import type * as host from "../host/mod.ts";
import * as isolation from "../isolation/mod.ts";
import * as migrate from "../migrate/mod.ts";
import { ErrJournalExists, ErrNotInstalled } from "./errors.ts";
import { loadJournal } from "./recorded.ts";

/** The node's applied config; ErrNotInstalled when it has none, ErrBadNodeConfig when unreadable. */
export async function appliedNode(paths: host.HostPaths): Promise<isolation.NodeConfig> {
  const cfg = await isolation.readNodeConfig(paths.nodeConfig);
  if (!cfg) {
    throw new ErrNotInstalled(
      `${paths.nodeConfig} does not exist: this node runs no stratum stack to migrate`,
    );
  }
  return cfg;
}

/** What to do about a journal that is there, for messages. */
export function nextFor(j: migrate.Journal): string {
  return migrate.isTerminal(j.step)
    ? "report it with `stratum migrate status`, then `stratum migrate ack`"
    : "run `stratum migrate resume`";
}

/** Refuses (ErrJournalExists) while a journal is there; an unreadable one rejects as corrupt. */
export async function requireNoJournal(paths: host.HostPaths): Promise<void> {
  const j = await loadJournal(new migrate.JournalStore(paths.journal));
  if (j) throw new ErrJournalExists(`A migration journal exists (step ${j.step}): ${nextFor(j)}`);
}
