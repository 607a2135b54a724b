// The VM suites as one test module, so `deno task test` runs them back to
// back in one of its two parallel workers, first, while the other worker
// runs every other file: each suite waits for the VM lock, and listed on
// their own one would hold a worker idle behind the other, or run alone at
// the end (scripts/test.ts). Named without `_test` so `deno test tests/`
// does not run them twice.
//
// CI (STRATUM_VM_TESTS=ci) boots one VM, not two: its real power cuts
// (right after `node install`, and after `stopping-source` is recorded) are
// made on the real node stack (tests/node_stack_vm_test.ts), with the same
// checks on disk as tests/vm_test.ts's (assertOnDisk). vm_test.ts runs in
// `deno task test` (install) and `deno task test:vm` (all).
import "./node_stack_vm_test.ts";

if ((Deno.env.get("STRATUM_VM_TESTS") ?? "ci") !== "ci") await import("./vm_test.ts");
