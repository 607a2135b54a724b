// The two VM suites as one test module, so `deno task test` runs them back to
// back in one of its two parallel workers, first, while the other worker
// runs every other file: each suite waits for the VM lock, and listed on
// their own one would hold a worker idle behind the other, or run alone at
// the end (scripts/test.ts). Named without `_test` so `deno test tests/`
// does not run them twice.
import "./node_stack_vm_test.ts";
import "./vm_test.ts";
