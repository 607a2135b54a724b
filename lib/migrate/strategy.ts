/** How a migration is carried out. */
export type Strategy = typeof StrategyInPlace | typeof StrategyReprovision;

/** Blue/green slots on the running node, with a journal and rollback. */
export const StrategyInPlace = "in-place";
/** Reset the node and bootstrap it again in the target mode, through a handoff command. */
export const StrategyReprovision = "reprovision";

/** Every strategy. */
export const strategies: readonly Strategy[] = Object.freeze([
  StrategyInPlace,
  StrategyReprovision,
]);

/** Reports whether `s` names a strategy. */
export function isStrategy(s: unknown): s is Strategy {
  return s === StrategyInPlace || s === StrategyReprovision;
}
