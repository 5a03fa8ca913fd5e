import { CsvError, parseCsv } from './csv.js';

/** One data row of a suppression CSV file (row 1 is the first after the header). */
export interface SuppressionCsvRow {
  row: number;
  platform: string;
  recipient: string;
  note: string | null;
}

const COLUMNS = ['platform', 'recipient', 'note'];

/**
 * A suppression list file: a header naming `recipient` and optionally `platform` and `note` (in any
 * order, any case). Without a platform column every row takes `defaultPlatform` ("*" unless given): a
 * file of phone numbers alone lists them on every platform. Throws CsvError for a file that is not such
 * a file; each row's own values are checked where it is listed.
 */
export function readSuppressionCsv(text: string, defaultPlatform = '*'): SuppressionCsvRow[] {
  const records = parseCsv(text);
  const header = records.shift()?.map((name) => name.trim().toLowerCase());
  if (!header) throw new CsvError('the file is empty (expected a header line naming recipient, and optionally platform and note)');
  const unknown = header.filter((name) => !COLUMNS.includes(name));
  if (unknown.length > 0) throw new CsvError(`unknown column ${unknown.map((n) => `"${n}"`).join(', ')} (columns: ${COLUMNS.join(', ')})`);
  if (!header.includes('recipient')) throw new CsvError('the header must name a recipient column');
  const duplicate = header.find((name, i) => header.indexOf(name) !== i);
  if (duplicate) throw new CsvError(`column "${duplicate}" appears twice`);
  const at = (record: string[], name: string): string | undefined => {
    const i = header.indexOf(name);
    return i < 0 ? undefined : (record[i] ?? '').trim();
  };
  return records.map((record, index) => {
    const note = at(record, 'note');
    return { row: index + 1, platform: at(record, 'platform') || defaultPlatform, recipient: at(record, 'recipient') ?? '', note: note ? note : null };
  });
}
