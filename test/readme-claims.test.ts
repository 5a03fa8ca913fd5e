import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe } from 'node:test';
import { test } from './fixtures/timed.js';
import { INPUT_NAMES } from './fixtures/audio-fixtures.js';
import { ROOT } from './fixtures/cli-process.js';

/** What the README promises, held to what the code and its tests do. */

const readme = (path = 'README.md'): Promise<string> => readFile(join(ROOT, path), 'utf8');

/** The README's name of each source format, to the fixture test/audio-convert.test.ts converts for every platform. */
const FORMAT_FIXTURES: Record<string, string> = {
  MP3: 'tone.mp3',
  'M4A (AAC)': 'tone.m4a',
  'AAC (ADTS)': 'tone.aac',
  'Ogg Opus': 'tone-opus.ogg',
  'Ogg Vorbis': 'tone-vorbis.ogg',
  Opus: 'tone.opus',
  WAV: 'tone.wav',
  WebM: 'tone.webm',
  FLAC: 'tone.flac',
  AMR: 'tone.amr',
  'the audio track of an MP4 video': 'video.mp4',
};

describe('the README', () => {
  test('every source format it lists is one the tests convert, and every converted one is listed', async () => {
    const line = /Sources it takes \([^)]*\): ([^.]+)\./.exec((await readme()).replace(/\s+/g, ' '));
    assert.ok(line, 'the Audio section lists the sources');
    const listed = line[1]!.split(/, (?:and )?/).map((s) => s.trim());
    for (const format of listed) assert.ok(FORMAT_FIXTURES[format], `no fixture converts "${format}"`);
    assert.deepEqual(listed.map((f) => FORMAT_FIXTURES[f]).sort(), [...INPUT_NAMES].sort());
  });

  test('says a field POST /send does not know is refused, never ignored (README and the client\'s)', async () => {
    for (const path of ['README.md', 'clients/typescript/README.md']) {
      const text = (await readme(path)).replace(/\s+/g, ' ');
      assert.doesNotMatch(text, /ignor\w* unknown fields|unknown fields (are )?ignored|fields it does not know are ignored/i, path);
    }
  });

  test('the way to change a login is a command that exists', async () => {
    const text = await readme();
    const ownerRow = text.split('\n').find((l) => l.startsWith('| `OWNER_EMAIL` |'));
    assert.match(ownerRow ?? '', /voicenote accounts set-login/);
    assert.match(text, /voicenote accounts set-login ACCOUNT_ID \[--email E\] \[--password P\] \[--json\]/);
  });
});
