/** RFC 4180 CSV: commas, double-quoted fields (with "" for a quote and line breaks inside), CRLF or LF. */

export class CsvError extends Error {}

/** Every record of the text, each a list of fields; blank lines are skipped. */
export function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let record: string[] = [];
  let field = '';
  let quoted = false;
  let line = 1;
  let quoteLine = 1;
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0; // a byte-order mark some spreadsheets write
  const endRecord = (): void => {
    record.push(field);
    if (!(record.length === 1 && record[0] === '')) records.push(record);
    record = [];
    field = '';
  };
  for (; i < text.length; i++) {
    const char = text[i]!;
    if (quoted) {
      if (char === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i++;
        } else quoted = false;
      } else {
        if (char === '\n') line++;
        field += char;
      }
    } else if (char === '"') {
      if (field !== '') throw new CsvError(`line ${line}: a quote inside an unquoted field`);
      quoted = true;
      quoteLine = line;
    } else if (char === ',') {
      record.push(field);
      field = '';
    } else if (char === '\n' || char === '\r') {
      if (char === '\r' && text[i + 1] === '\n') i++;
      endRecord();
      line++;
    } else field += char;
  }
  if (quoted) throw new CsvError(`line ${quoteLine}: a quoted field is not closed`);
  if (field !== '' || record.length > 0) endRecord();
  return records;
}
