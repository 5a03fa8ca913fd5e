/** "1 account", "2 accounts", "0 accounts": a count with its noun agreeing. */
export function counted(n: number, singular: string, plural = `${singular}s`): string {
  return `${n} ${n === 1 ? singular : plural}`;
}
