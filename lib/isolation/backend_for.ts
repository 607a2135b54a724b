import type { Backend } from "./backend.ts";
import type { BackendDeps } from "./_slot_backend.ts";
import { HostBackend } from "./host_backend.ts";
import type { Mode } from "./mode.ts";
import { NspawnBackend } from "./nspawn_backend.ts";

/** The real backend of `mode`. */
export function backendFor(mode: Mode, deps: BackendDeps): Backend {
  return mode === "host" ? new HostBackend(deps) : new NspawnBackend(deps);
}
