// deno-lint-ignore-file no-console
// `deno task test [FILES...]`: what the README promises on a fresh machine.
// It installs the Debian packages the tests drive (scripts/setup.ts), builds
// both artifacts (scripts/compile, about 7 s each) so the end-to-end tests
// run what operators copy onto nodes, then runs `deno test` with the
// permissions the suite needs. Without FILES it runs every test in tests/.

import { join } from "node:path";
import { buildArtifact, root, testPermissions } from "./artifact_build.ts";
import { setupOrExit } from "./setup.ts";

await setupOrExit("test");

// The VM's power cuts: the one right after `node install` here (about two
// minutes with the image build); CI sets STRATUM_VM_TESTS=ci for its subset
// (each suite's header), and `deno task test:vm` runs all of them.
const env: Record<string, string> = {
  STRATUM_VM_TESTS: Deno.env.get("STRATUM_VM_TESTS") ?? "install",
};
for (const arch of ["x86_64", "aarch64"] as const) {
  const bin = await buildArtifact(arch);
  if (!bin) {
    console.error(`test: scripts/compile ${arch} failed`);
    Deno.exit(1);
  }
  env[arch === "x86_64" ? "STRATUM_BIN" : "STRATUM_BIN_AARCH64"] = bin;
}
const files = Deno.args.length > 0 ? Deno.args : await everyTestFile();
// One unpack cache of the artifact for every test file of this run, under
// .test-tmp (the sandboxes see the checkout, not /tmp), removed after it
// with .test-tmp itself when nothing else is left there.
const testTmp = join(root, ".test-tmp");
await Deno.mkdir(testTmp, { recursive: true });
const cacheDir = await Deno.makeTempDir({ dir: testTmp, prefix: "stratum-cache-" });
env.STRATUM_TEST_CACHE = join(cacheDir, "cache");
// Two test files at a time (one per core): most of a sandbox test's time is
// systemd, a stack starting and a VM booting, not this process. Every test
// file is independent (its own namespaces, ports, scratch directories).
const t = await new Deno.Command(Deno.execPath(), {
  args: ["test", "--parallel", ...testPermissions, ...files],
  cwd: root,
  stdin: "null",
  env,
}).spawn().status;
await Deno.remove(cacheDir, { recursive: true });
await Deno.remove(testTmp).catch(() => {}); // not empty: the CI check names what is left
Deno.exit(t.code);

/**
 * Every test file, the VM suites first as one module (tests/vm_suites.ts):
 * Deno starts files in the order given, two at a time, so the VMs (the
 * longest, and serialised by their lock) take one worker from the start
 * while the other works through the rest.
 */
async function everyTestFile(): Promise<string[]> {
  const vm = ["node_stack_vm_test.ts", "vm_test.ts"];
  const rest: string[] = [];
  for await (const e of Deno.readDir(join(root, "tests"))) {
    if (e.isFile && e.name.endsWith("_test.ts") && !vm.includes(e.name)) {
      rest.push(`tests/${e.name}`);
    }
  }
  return ["tests/vm_suites.ts", ...rest.sort()];
}
