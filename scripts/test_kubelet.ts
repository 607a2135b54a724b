// deno-lint-ignore-file no-console
// `deno task test:kubelet`: tests/kubelet_vm.ts, a real kubelet and
// kube-apiserver (v1.26, built from source: docs/testing.md says how) in the
// VM. They come by environment, KUBELET_BIN and KUBE_APISERVER_BIN; without
// them the whole task is skipped with one line (it is not part of the
// README's test command, so CI never counts it).

import { join } from "node:path";
import { buildArtifact, root, testPermissions } from "./artifact_build.ts";

const missing = ["KUBELET_BIN", "KUBE_APISERVER_BIN"].filter((v) => !Deno.env.get(v));
if (missing.length > 0) {
  console.log(
    `test:kubelet skipped: set ${missing.join(" and ")} (kubelet and kube-apiserver v1.26 ` +
      "built from source; docs/testing.md)",
  );
  Deno.exit(0);
}
const bin = await buildArtifact("x86_64");
if (!bin) Deno.exit(1);
const t = await new Deno.Command(Deno.execPath(), {
  args: ["test", ...testPermissions, "tests/kubelet_vm.ts"],
  cwd: root,
  env: { STRATUM_BIN: bin },
}).spawn().status;
await Deno.remove(join(root, ".test-tmp")).catch(() => {});
Deno.exit(t.code);
