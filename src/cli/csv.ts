// The CSV reader lives with the rules without I/O (the dashboard's suppression import reads CSV too).
export { CsvError, parseCsv } from '../core/csv.js';
