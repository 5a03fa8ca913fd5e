import { randomBytesPooled } from '../../core/random.js';
import type { FileHandle } from 'node:fs/promises';

// The Bot API's uploads: multipart/form-data around one voice file, streamed from an open handle.

export interface FilePart {
  name: string;
  fileName: string;
  mimeType: string;
  file: FileHandle;
  size: number;
}

// RFC 7578 as the WHATWG form encoder writes it: quotes and line breaks in names are percent-escaped.
const escapeName = (value: string): string => value.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A');

/** multipart/form-data around one file: what comes before its bytes and what comes after. */
export function multipartParts(fields: Array<[string, string]>, part: Omit<FilePart, 'file' | 'size'>): { contentType: string; head: Buffer; tail: Buffer } {
  const boundary = `voicenote-${randomBytesPooled(24).toString('base64url')}`;
  const head = Buffer.concat([
    ...fields.map(([name, value]) =>
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${escapeName(name)}"\r\n\r\n${value}\r\n`, 'utf8'),
    ),
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="${escapeName(part.name)}"; filename="${escapeName(part.fileName)}"\r\n` +
        `Content-Type: ${part.mimeType}\r\n\r\n`,
      'utf8',
    ),
  ]);
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`, 'utf8');
  return { contentType: `multipart/form-data; boundary=${boundary}`, head, tail };
}

/**
 * multipart/form-data with the file streamed from an open handle and a length known up front, so the
 * upload is never chunked and nothing larger than a read buffer sits in memory.
 */
export function multipartBody(fields: Array<[string, string]>, part: FilePart): { contentType: string; length: number; stream(): AsyncIterable<Buffer> } {
  const { contentType, head, tail } = multipartParts(fields, part);
  return {
    contentType,
    length: head.length + part.size + tail.length,
    async *stream() {
      yield head;
      let position = 0;
      while (position < part.size) {
        const { buffer, bytesRead } = await part.file.read({ buffer: Buffer.alloc(Math.min(64 * 1024, part.size - position)), position });
        if (bytesRead === 0) throw new Error('the voice file is shorter than when the upload started');
        position += bytesRead;
        yield bytesRead === buffer.length ? buffer : buffer.subarray(0, bytesRead);
      }
      yield tail;
    },
  };
}
