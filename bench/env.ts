/** Reads the bench scripts' settings from the environment. */

/** A number from `name`, at least `min`; `fallback` when unset or blank. */
export function intEnv(name: string, fallback: number, min: number): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min) throw new Error(`${name} must be a number ≥ ${min}, got "${raw}"`);
  return value;
}

/** Node flags from a variable, split on blanks (unset or blank: none). */
export const nodeFlags = (name: string): string[] => process.env[name]?.split(/\s+/).filter(Boolean) ?? [];
