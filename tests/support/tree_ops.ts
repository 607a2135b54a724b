// A child process for the durable-file tests, to be traced with strace:
//   tree_ops.ts sync-tree DIR | sync-dirs DIR | ensure-dir DIR | remove-tree DIR | symlink PATH
import {
  ensureDir,
  removeTreeDurable,
  symlinkDurable,
  syncTree,
} from "../../lib/host/durable_file.ts";

const [op, dir] = Deno.args;
if (!dir) throw new Error("usage: tree_ops.ts OP DIR");
if (op === "sync-tree") await syncTree(dir);
else if (op === "sync-dirs") await syncTree(dir, { dirsOnly: true });
else if (op === "ensure-dir") await ensureDir(dir);
else if (op === "remove-tree") await removeTreeDurable(dir);
else if (op === "symlink") await symlinkDurable("../target.service", dir);
else throw new Error(`unknown op ${op}`);
